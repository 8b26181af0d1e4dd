"""A policy computed by the user's function of the features: spec ``callable:module:function``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dr_scale.core.errors import UserError
from dr_scale.logs.contract import Partition
from dr_scale.logs.targets import check_distributions
from dr_scale.policies.base import Policy
from dr_scale.policies.distributions import ActionDistribution, ChosenActions, DenseProbs


@dataclass
class CallablePolicy(Policy):
    """A policy computed by a function: ``function(X, row_id)`` returning (n,) actions or (n, k) probabilities.

    Spec ``callable:module:function``. X is the partition's (n, d) CSR features and ``row_id``
    its row ids; the module is imported when the policy is made, so a missing module or function
    is an error before any log is read. What the function returns is checked as a column's
    actions or probabilities are.

    Parameters
    ----------
    target : str
        ``"module:function"``, the module importable (installed or on ``PYTHONPATH``).

    See Also
    --------
    LinearPolicy : A learned policy from a file.

    Examples
    --------
    The bundled example's candidate policy, computed from the features, is the one stored in
    its ``target_action`` column:

    >>> from dr_scale import read_log
    >>> from dr_scale.synthetic.example import example_paths
    >>> logs, _ = example_paths()  # the bundled example: 3 actions, a candidate policy in ``target_action``
    >>> part = read_log(logs + "/date=2026-11-01", extra_columns=["target_action"])[0]
    >>> from dr_scale.policies import ActionColumnPolicy
    >>> policy = CallablePolicy("dr_scale.synthetic.example:candidate_policy")
    >>> bool((policy.distribution(part, 3).actions == ActionColumnPolicy().distribution(part, 3).actions).all())
    True
    """

    target: str
    needs_features = True

    def __post_init__(self) -> None:
        self.function()  # a missing module or function is an error now, not in the first task

    def function(self) -> Callable[..., Any]:
        """The function ``module:function`` names, imported on first use."""
        module, _, name = self.target.partition(":")
        if not module or not name:
            raise UserError(f"policy callable:{self.target}: give callable:module:function")
        try:
            function: Callable[..., Any] = getattr(importlib.import_module(module), name)
        except ImportError as exc:
            raise UserError(f"policy callable:{self.target}: cannot import module {module!r} ({exc}); "
                            "is it installed or on PYTHONPATH?") from None
        except AttributeError:
            raise UserError(f"policy callable:{self.target}: module {module!r} has no {name!r}") from None
        except Exception as exc:  # noqa: BLE001 - the module's own import-time failure
            raise UserError(f"policy callable:{self.target}: importing {module!r} failed: "
                            f"{type(exc).__name__}: {exc}") from None
        if not callable(function):
            raise UserError(f"policy callable:{self.target}: {name!r} is not a function")
        return function

    def distribution(self, part: Partition, k: int) -> ActionDistribution:
        """π(·|x_i) from the function's output on (X, row_id): one action per row (a deterministic π) or
        an (n, k) matrix of probabilities, checked.
        """
        where = f"<callable:{self.target}>"
        try:
            out = np.asarray(self.function()(part.X, part.row_id))
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: its failure is the user's to fix, named
            raise UserError(f"policy callable:{self.target} raised {type(exc).__name__}: {exc} "
                            f"(on {part.source})") from None
        if out.dtype.kind not in "biuf" or out.ndim not in (1, 2) or out.shape[0] != len(part):
            raise UserError(f"policy callable:{self.target} returned {out.dtype} of shape {out.shape} on "
                            f"{part.source}; expected ({len(part)},) actions or ({len(part)}, {k}) probabilities")
        if out.ndim == 1:
            if out.dtype.kind == "f" and not np.array_equal(out, np.floor(out)):
                raise UserError(f"policy callable:{self.target} returned non-integer actions on {part.source}")
            return ChosenActions(self._check_actions(out.astype(np.int64), k, part, where), k)
        if out.shape != (len(part), k):
            raise UserError(f"policy callable:{self.target} returned shape {out.shape} on {part.source}, "
                            f"expected ({len(part)}, {k})")
        return DenseProbs(check_distributions(out.astype(np.float64), part.source, where, part.row_id))

    def __str__(self) -> str:
        return f"callable:{self.target}"
