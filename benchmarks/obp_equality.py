"""Every estimator's value beside Open Bandit Pipeline 0.5.7's on one simulated log.

    pip install --no-deps --ignore-requires-python --target /tmp/obp obp==0.5.7
    PYTHONPATH=/tmp/obp python benchmarks/obp_equality.py

obp 0.5.7 needs Python < 3.11 and torch; its estimators never call torch, so stand-in
``torch`` (and, if missing, ``seaborn``) modules are put in ``sys.modules`` before it is
imported (enough for the estimators; obp's neural learners would not work). A
stochastic target policy on a 5,000-row log of :class:`~dr_scale.synthetic.finite_world.BanditWorld`;
prints both values and their absolute difference.
"""

from __future__ import annotations

import importlib.util
import sys
import types


class _Stub(types.ModuleType):
    """A module whose every attribute is another stub: enough for obp's module-level torch annotations."""

    __path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Stub(name)
        setattr(self, name, value)
        return value

    def __call__(self, *args, **kwargs):
        return _Stub("call")

    def __mro_entries__(self, bases):
        return (object,)


for _name in ("torch", "torch.nn", "torch.optim", "torch.nn.functional", "torch.utils", "torch.utils.data", "seaborn"):
    if _name == "seaborn" and importlib.util.find_spec("seaborn"):
        continue
    sys.modules[_name] = _Stub(_name)
sys.modules["torch"].Tensor = type("Tensor", (), {})  # scipy asks whether an array is a torch tensor

import numpy as np  # noqa: E402
from obp.ope import estimators as ob  # noqa: E402

from dr_scale.ope.estimators import IPS, SNDR, SNIPS, DirectMethod, DoublyRobust, SwitchDR  # noqa: E402
from dr_scale.synthetic.finite_world import BanditWorld  # noqa: E402


def main() -> None:
    log = BanditWorld.make(epsilon=0.1).sample(5000, seed=2)
    log["target_probs"] = 0.8 * log["target_probs"] + 0.2 / 5  # a stochastic target policy
    n = log["reward"].size
    theirs = dict(reward=log["reward"], action=log["action"], pscore=log["propensity"],
                  action_dist=log["target_probs"][:, :, None], position=np.zeros(n, int))
    model = dict(estimated_rewards_by_reg_model=log["reward_hat"][:, :, None])
    pairs = [(ob.DirectMethod(), DirectMethod(), True), (ob.InverseProbabilityWeighting(), IPS(), False),
             (ob.SelfNormalizedInverseProbabilityWeighting(), SNIPS(), False),
             (ob.DoublyRobust(), DoublyRobust(), True), (ob.SelfNormalizedDoublyRobust(), SNDR(), True),
             (ob.SwitchDoublyRobust(lambda_=5.0), SwitchDR(tau=5.0), True)]
    for reference, estimator, needs_model in pairs:
        a = reference.estimate_policy_value(**theirs, **(model if needs_model else {}))
        b = estimator.estimate_policy_value(**log)
        print(f"{type(reference).__name__:<42} {estimator!r:<18} {a:.15f} {b:.15f} {abs(a - b):.1e}")


if __name__ == "__main__":
    main()
