"""The direct method (Dudík, Langford & Li 2011, Sec. 2.1): the reward model's value of π."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dr_scale.core.errors import ParameterError
from dr_scale.ope.estimators.base import Estimator
from dr_scale.ope.estimators.inputs import RowInputs


@dataclass(frozen=True)
class DirectMethod(Estimator):
    """Direct method (Dudík, Langford & Li 2011, Sec. 2.1): the reward model's value of π.

        V̂_DM = (1/n) Σ_i Σ_a π(a|x_i) ρ̂_a(x_i)

    (the paper's V̂_DM = (1/|S|) Σ_x ρ̂_{π(x)}(x) for a deterministic π). Unbiased when ρ̂ is;
    the logged rewards are not used. Its empirical-likelihood interval is that of a plain mean.
    Takes no parameters.

    See Also
    --------
    IPS : The estimator without a reward model.
    DoublyRobust : The reward model corrected by the importance-weighted residuals.

    Examples
    --------
    >>> from dr_scale.synthetic.finite_world import BanditWorld
    >>> log = BanditWorld.make(epsilon=0.02).sample(2000, seed=1)  # true value 0.7825
    >>> est = DirectMethod().estimate(**log)
    >>> round(est.value, 4), round(est.stderr, 4), est.n
    (0.6578, 0.0026, 2000)
    """

    name: ClassVar[str] = "DM"
    needs_propensity: ClassVar[bool] = False
    model_based: ClassVar[bool] = True

    def shared_terms(self) -> tuple[str, ...]:
        """ρ̂_π (:data:`~dr_scale.ope.estimators.base.SHARED_TERMS`)."""
        return ("ρ̂_π",)

    def terms(self, rows: RowInputs) -> list[np.ndarray]:
        """(ρ̂_π(x_i),) with ρ̂_π(x) = Σ_a π(a|x) ρ̂_a(x): V̂_DM = (1/n) Σ_i ρ̂_π(x_i)."""
        if rows.reward_hat_pi is None:
            raise ParameterError(f"{self.name} needs a reward model ρ̂ (`reward_hat`); none was given")
        return [rows.reward_hat_pi]
