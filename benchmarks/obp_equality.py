"""Every estimator's value beside Open Bandit Pipeline 0.5.7's, and the time of each, in one run.

    pip install --no-deps --ignore-requires-python --target /tmp/obp obp==0.5.7
    PYTHONPATH=/tmp/obp python benchmarks/obp_equality.py [--quick] [--repeats N]

obp 0.5.7 needs Python < 3.11 and torch; its estimators never call torch, so stand-in
``torch`` (and, if missing, ``seaborn``) modules are put in ``sys.modules`` before it is
imported (enough for the estimators; obp's neural learners would not work).

1. The seven estimators obp shares with dr-scale on a 5,000-row log of
   :class:`~dr_scale.synthetic.finite_world.BanditWorld` with a stochastic target policy.
2. The clipping, shrinkage and sub-Gaussian estimators (``IPS(lambda_)``, ``DR(lambda_)``, ``DRos``,
   ``SubGaussianIPS``, ``SubGaussianDR``) at fixed λ, and tuned (``IPSTuning``, ``DRTuning``, ``DRos``,
   ``SubGaussian…``, ``SwitchDRTuning`` against obp's ``…Tuning`` classes, "slope" and "mse", with and
   without the bias upper bound), and the replay method and B-IPW (``RM``, ``BIPW``, ``BIPW(lambda_)``
   against ``ReplayMethod`` and ``BalancedInverseProbabilityWeighting`` given the same estimated weights),
   on :func:`configurations`: n, k, light- or heavy-tailed weights, Bernoulli or Gaussian rewards, λ values.
   Prints the largest difference of the values (and whether every tuned λ equals obp's ``best_hyperparam``).
3. Timing side by side: each estimator on the same arrays (n = 200,000, k = 10), the least CPU time of
   5 runs (``--repeats``), dr-scale's ``estimate`` (input checks, the state, the value, its standard error and the
   interval's summary) against obp's ``estimate_policy_value`` (checks and the value), and the ratio.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
import time
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

from dr_scale.ope.estimators import (  # noqa: E402
    CLIPPING_LAMBDAS,
    IPS,
    SNDR,
    SNIPS,
    SUBGAUSSIAN_LAMBDAS,
    BalancedIPW,
    DirectMethod,
    DoublyRobust,
    DRos,
    DRTuning,
    IPSTuning,
    ReplayMethod,
    RowInputs,
    SubGaussianDR,
    SubGaussianIPS,
    SwitchDR,
    SwitchDRTuning,
)
from dr_scale.synthetic.finite_world import BanditWorld  # noqa: E402


def main(quick: bool = False, repeats: int | None = None) -> None:
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

    print()
    worst, count, chosen_equal, chosen_count, undefined = 0.0, 0, 0, 0, []
    for config in configurations(quick):
        for row in compare(config):
            count += 1
            worst = max(worst, row["difference"]) if not math.isnan(row["difference"]) else math.nan
            undefined += [row["label"]] if row["obp_undefined"] else []
            if row["ours_lambda"] is not None or row["obp_lambda"] is not None:
                chosen_count += 1
                chosen_equal += row["ours_lambda"] == row["obp_lambda"]
    print(f"{count} (configuration, estimator) pairs over {len(configurations(quick))} configurations: largest "
          f"|dr-scale − obp| / max(1, |obp|) = {worst:.1e}; tuned λ equal to obp's in {chosen_equal} of {chosen_count}")
    shrunk = [label for label in undefined if label != "RM"]
    if shrunk:
        print(f"obp's value is NaN (0/0 at rows of weight 0) for {', '.join(sorted(set(shrunk)))} in "
              f"{len(shrunk)} pairs; dr-scale's (ŵ = 0 there) is compared with DM's value, the λ = 0 limit")
    if "RM" in undefined:
        print(f"RM has no row where π(a_i|x_i) = 1 in {undefined.count('RM')} configurations: obp's value is 0, "
              "dr-scale's NaN (0/0)")

    print()
    timing(n=20_000 if quick else 200_000, repeats=repeats or (2 if quick else 5))


# -- the clipping, shrinkage and sub-Gaussian estimators and their tuning ---------------------------------------------
def make_arrays(n: int, k: int, heavy: bool, gaussian: bool, deterministic: bool, seed: int) -> dict:
    """A log in dr-scale's layout: a logging policy (Dirichlet(0.3) per row if ``heavy``: weights up to ~10⁴;
    else Dirichlet(5)), the logged action from it, a target policy (one-hot or Dirichlet(1)), rewards
    (N(μ, 1) or Bernoulli(μ)) and a reward model μ + noise."""
    rng = np.random.default_rng(seed)
    logging = rng.dirichlet(np.full(k, 0.3 if heavy else 5.0), size=n)
    logging = np.maximum(logging, 1e-5)
    logging /= logging.sum(axis=1, keepdims=True)
    action = (rng.random(n)[:, None] >= np.cumsum(logging, axis=1)).sum(axis=1).clip(max=k - 1)
    if deterministic:
        target = np.eye(k)[rng.integers(0, k, n)]
    else:
        target = rng.dirichlet(np.ones(k), size=n)
    mu = rng.uniform(0.1, 0.9, size=(n, k))
    mean = mu[np.arange(n), action]
    reward = rng.normal(mean, 1.0) if gaussian else (rng.random(n) < mean).astype(float)
    reward_hat = np.clip(mu + rng.normal(0, 0.2, size=(n, k)), 0, 1)
    return dict(reward=reward, action=action, propensity=logging[np.arange(n), action], target_probs=target,
                reward_hat=reward_hat)


def configurations(quick: bool = False) -> list[dict]:
    """n × k × tails × rewards × target kind, each with its own λ values: 64 configurations (16 with ``quick``)."""
    out = []
    sizes = (40, 300, 3000, 20000) if not quick else (40, 3000)
    for i, (n, k, heavy, gaussian, deterministic) in enumerate(itertools.product(
            sizes, (2, 10), (False, True), (False, True), (False, True) if not quick else (False,))):
        rng = np.random.default_rng(1000 + i)
        clip = float(rng.choice([0.5, 1.0, 2.0, 5.0, 20.0, 100.0, 1000.0, np.inf]))
        shrink = float(rng.choice([0.0, 0.1, 1.0, 10.0, 100.0, 1e4, np.inf]))
        subgaussian = float(rng.choice([0.0, 0.01, 0.1, 0.3, 0.9]))
        out.append(dict(n=n, k=k, heavy=heavy, gaussian=gaussian, deterministic=deterministic, seed=i, clip=clip,
                        shrink=shrink, subgaussian=subgaussian))
    return out


def _obp_arrays(arrays: dict) -> tuple[dict, dict]:
    n = arrays["reward"].size
    theirs = dict(reward=arrays["reward"], action=arrays["action"], pscore=arrays["propensity"],
                  action_dist=arrays["target_probs"][:, :, None], position=np.zeros(n, int))
    return theirs, dict(estimated_rewards_by_reg_model=arrays["reward_hat"][:, :, None])


def estimator_pairs(config: dict) -> list[tuple]:
    """(label, obp's estimator factory, dr-scale's estimator, needs a model, tuned) for one configuration."""
    from obp.ope import estimators_tuning as obt

    clip, shrink, sg = config["clip"], config["shrink"], config["subgaussian"]
    pairs = [
        (f"IPS(lambda_={clip:g})", lambda: ob.InverseProbabilityWeighting(lambda_=clip), IPS(lambda_=clip), False,
         False),
        (f"DR(lambda_={clip:g})", lambda: ob.DoublyRobust(lambda_=clip), DoublyRobust(lambda_=clip), True, False),
        (f"DRos(lambda_={shrink:g})", lambda: ob.DoublyRobustWithShrinkage(lambda_=shrink), DRos(lambda_=shrink),
         True, False),
        (f"SubGaussianIPS(lambda_={sg:g})", lambda: ob.SubGaussianInverseProbabilityWeighting(lambda_=sg),
         SubGaussianIPS(lambda_=sg), False, False),
        (f"SubGaussianDR(lambda_={sg:g})", lambda: ob.SubGaussianDoublyRobust(lambda_=sg), SubGaussianDR(lambda_=sg),
         True, False),
    ]
    tuned = [(obt.InverseProbabilityWeightingTuning, IPSTuning, CLIPPING_LAMBDAS, False),
             (obt.DoublyRobustTuning, DRTuning, CLIPPING_LAMBDAS, True),
             (obt.DoublyRobustWithShrinkageTuning, DRos, CLIPPING_LAMBDAS, True),
             (obt.SubGaussianInverseProbabilityWeightingTuning, SubGaussianIPS, SUBGAUSSIAN_LAMBDAS, False),
             (obt.SubGaussianDoublyRobustTuning, SubGaussianDR, SUBGAUSSIAN_LAMBDAS, True),
             (obt.SwitchDoublyRobustTuning, SwitchDRTuning, CLIPPING_LAMBDAS, True)]
    for method, bound in (("slope", True), ("mse", True), ("mse", False)):
        for reference, ours, lambdas, needs_model in tuned:
            estimator = ours(tuning_method=method, variance="sample", use_bias_upper_bound=bound)

            def factory(reference=reference, lambdas=lambdas, method=method, bound=bound):
                return reference(lambdas=list(lambdas), tuning_method=method, use_bias_upper_bound=bound)

            pairs.append((estimator.label, factory, estimator, needs_model, True))
    return pairs


def compare(config: dict) -> list[dict]:
    """Each estimator's value (and chosen λ) against obp's on one configuration's arrays."""
    keys = ("n", "k", "heavy", "gaussian", "deterministic", "seed")
    arrays = make_arrays(**{key: config[key] for key in keys})
    theirs, model = _obp_arrays(arrays)
    rows = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for label, factory, estimator, needs_model, tuned in estimator_pairs(config):
            reference = factory()
            expected = float(reference.estimate_policy_value(**theirs, **(model if needs_model else {})))
            result = estimator.estimate(**arrays)
            undefined = math.isnan(expected)  # obp's 0/0 at a row of weight 0: DRos at λ = 0 (dr-scale: ŵ = 0, DM)
            if undefined:
                expected = DirectMethod().estimate(**arrays).value
            difference = abs(result.value - expected) / max(1.0, abs(expected))
            rows.append(dict(config=config, label=label, obp=expected, ours=result.value, difference=difference,
                             obp_undefined=undefined,
                             obp_lambda=float(reference.best_hyperparam) if tuned else None,
                             ours_lambda=float(result.chosen["lambda_"]) if tuned else None))
    return rows + compare_without_propensities(config, arrays)


def replay_and_balanced_arrays(config: dict, arrays: dict) -> dict:
    """The configuration's arrays for the replay method and B-IPW: a target that is deterministic (its most likely
    action) on every other row, so that π(a_i|x_i) = 1 somewhere, and estimated importance weights ŵ = w · e^ε,
    ε ~ N(0, 0.3²) (a classifier's estimate: the weights π(a_i|x_i) / π₀(a_i|x_i) up to noise)."""
    rng = np.random.default_rng(5000 + config["seed"])
    target = arrays["target_probs"].copy()
    n, k = target.shape
    half = np.arange(n) % 2 == 0
    target[half] = np.eye(k)[target[half].argmax(axis=1)]
    weight = target[np.arange(n), arrays["action"]] / arrays["propensity"]
    return {**arrays, "target_probs": target, "estimated_importance_weights": weight * np.exp(rng.normal(0, 0.3, n))}


def compare_without_propensities(config: dict, arrays: dict) -> list[dict]:
    """RM, BIPW and BIPW(lambda_) against obp's ``ReplayMethod`` and ``BalancedInverseProbabilityWeighting``."""
    arrays = replay_and_balanced_arrays(config, arrays)
    theirs, _ = _obp_arrays(arrays)
    weights = arrays["estimated_importance_weights"]
    clip = config["clip"]
    given = {"estimated_importance_weights": weights}
    pairs = [("RM", ob.ReplayMethod(), ReplayMethod(), {}),
             ("BIPW", ob.BalancedInverseProbabilityWeighting(), BalancedIPW(), given),
             (f"BIPW(lambda_={clip:g})", ob.BalancedInverseProbabilityWeighting(lambda_=clip),
              BalancedIPW(lambda_=clip), given)]
    rows = []
    for label, reference, estimator, extra in pairs:
        expected = float(reference.estimate_policy_value(**theirs, **extra))
        ours = arrays if extra else {key: v for key, v in arrays.items() if key != "estimated_importance_weights"}
        value = estimator.estimate(**ours).value
        # no row where π(a_i|x_i) = 1: RM's ratio is 0/0, which obp reports as 0 and dr-scale as NaN
        undefined = label == "RM" and not np.any(arrays["target_probs"][np.arange(weights.size), arrays["action"]] == 1)
        difference = (0.0 if undefined and math.isnan(value) and expected == 0.0
                      else abs(value - expected) / max(1.0, abs(expected)))
        rows.append(dict(config=config, label=label, obp=expected, ours=value, difference=difference,
                         obp_undefined=undefined, obp_lambda=None, ours_lambda=None))
    return rows


# -- timing ----------------------------------------------------------------------------------------------------------
def _best_time(function, repeats: int) -> float:
    """The least CPU time of ``repeats`` calls (process time: less disturbed than wall time by other processes
    on a shared machine; numpy's BLAS threads count)."""
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def timing(n: int, repeats: int) -> None:
    """Each estimator's time, dr-scale beside obp on the same arrays, and the ratio obp / dr-scale."""
    from obp.ope import estimators_tuning as obt

    arrays = make_arrays(n, 10, heavy=True, gaussian=False, deterministic=False, seed=7)
    theirs, model = _obp_arrays(arrays)
    cases = [
        ("IPS(lambda_=50)", lambda: ob.InverseProbabilityWeighting(lambda_=50.0), IPS(lambda_=50), False),
        ("DR(lambda_=50)", lambda: ob.DoublyRobust(lambda_=50.0), DoublyRobust(lambda_=50), True),
        ("DRos(lambda_=10)", lambda: ob.DoublyRobustWithShrinkage(lambda_=10.0), DRos(lambda_=10), True),
        ("SubGaussianIPS(lambda_=0.1)", lambda: ob.SubGaussianInverseProbabilityWeighting(lambda_=0.1),
         SubGaussianIPS(lambda_=0.1), False),
        ("SubGaussianDR(lambda_=0.1)", lambda: ob.SubGaussianDoublyRobust(lambda_=0.1), SubGaussianDR(lambda_=0.1),
         True),
        ("IPSTuning (slope)", lambda: obt.InverseProbabilityWeightingTuning(lambdas=list(CLIPPING_LAMBDAS)),
         IPSTuning(), False),
        ("DRTuning (slope)", lambda: obt.DoublyRobustTuning(lambdas=list(CLIPPING_LAMBDAS)), DRTuning(), True),
        ("DRos (slope)", lambda: obt.DoublyRobustWithShrinkageTuning(lambdas=list(CLIPPING_LAMBDAS)), DRos(), True),
        ("DRos (mse)", lambda: obt.DoublyRobustWithShrinkageTuning(lambdas=list(CLIPPING_LAMBDAS),
                                                                   tuning_method="mse"),
         DRos(tuning_method="mse"), True),
        ("SubGaussianIPS (slope)",
         lambda: obt.SubGaussianInverseProbabilityWeightingTuning(lambdas=list(SUBGAUSSIAN_LAMBDAS)),
         SubGaussianIPS(), False),
        ("SubGaussianDR (slope)", lambda: obt.SubGaussianDoublyRobustTuning(lambdas=list(SUBGAUSSIAN_LAMBDAS)),
         SubGaussianDR(), True),
        ("SwitchDRTuning (slope)", lambda: obt.SwitchDoublyRobustTuning(lambdas=list(CLIPPING_LAMBDAS)),
         SwitchDRTuning(), True),
    ]
    rows = {True: RowInputs.from_arrays(**arrays),
            False: RowInputs.from_arrays(**{key: v for key, v in arrays.items() if key != "reward_hat"})}
    print(f"n = {n:,}, k = 10, heavy-tailed weights; CPU time, best of {repeats} runs. dr-scale's estimate checks")
    print("the (n, k) arrays and forms the per-row quantities first; 'state' is the estimator's own work on them")
    print("(a Parquet part's or a Dask task's: the state and the result)")
    print(f"{'estimator':<30} {'obp 0.5.7':>11} {'dr-scale':>11} {'obp / dr-scale':>15} {'state':>11} "
          f"{'obp / state':>12}")
    totals = np.zeros(3)
    for label, factory, estimator, needs_model in cases:
        extra = model if needs_model else {}
        t_obp = _best_time(lambda: factory().estimate_policy_value(**theirs, **extra), repeats)  # noqa: B023
        ours = arrays if needs_model else {key: v for key, v in arrays.items() if key != "reward_hat"}
        t_ours = _best_time(lambda: estimator.estimate(**ours), repeats)  # noqa: B023 - called at once
        t_state = _best_time(lambda: estimator.result(estimator.state(rows[needs_model])), repeats)  # noqa: B023
        totals += (t_obp, t_ours, t_state)
        print(f"{label:<30} {1e3 * t_obp:>9.1f}ms {1e3 * t_ours:>9.1f}ms {t_obp / t_ours:>14.2f}× "
              f"{1e3 * t_state:>9.1f}ms {t_obp / t_state:>11.2f}×")
    t_obp, t_ours, t_state = totals
    print(f"{'all of them':<30} {1e3 * t_obp:>9.1f}ms {1e3 * t_ours:>9.1f}ms {t_obp / t_ours:>14.2f}× "
          f"{1e3 * t_state:>9.1f}ms {t_obp / t_state:>11.2f}×")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(quick="--quick" in args, repeats=int(args[args.index("--repeats") + 1]) if "--repeats" in args else None)
