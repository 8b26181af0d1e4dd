"""Benchmark: the logging policy π̂₀(a | x) fitted out of core vs scikit-learn's multinomial logistic regression.

    pip install ".[benchmarks]"
    python benchmarks/fit_propensity_vs_sklearn.py --rows 1000000 --data data/bench-propensity

The data (cached under ``--data``, reused when present): ``dr-scale generate bandit --rows N --features
262144 --actions 10 --seed 0``; the keyed split ``LogFilter(split="train" | "test", test_fraction=0.1)``
trains on ~90% of the rows and holds out the rest. Each fit runs as its own process, its line printed as
soon as it has run (wall time, CPU time of the process, peak resident memory):

(a) :func:`dr_scale.fit_propensity_model` on the training rows at λ (``--lam``, default 10) and the fitter's
    default tolerance (``--rtol``), without folds (one model, as scikit-learn fits), out of core;
(b) ``LogisticRewardModel``'s sibling in scikit-learn: ``LogisticRegression(solver="lbfgs", C=1/λ)`` —
    multinomial for k > 2 — on the same training rows read into memory (reading not timed; its ``tol`` 1e-4
    and ``max_iter`` its default 100, or ``--sklearn-max-iter``: the row says whether it converged); with
    ``--sklearn-timeout CPU_SECONDS`` it is stopped once its fit has used that much CPU time, and its row shows
    the time at the stop (a lower bound) and no log loss;
(c) Vowpal Wabbit ``--oaa 10 --loss_function logistic --probabilities -b 18`` through its own text driver, one
    pass over the training rows as text (written once, not timed), if ``vowpalwabbit`` is installed.

Then each model predicts the held-out rows: held-out log loss −(1/H) Σ_i log π̂(a_i | x_i), beside the
marginal action frequencies' (the best constant) and the logger's true propensities' (the floor). Printed:
the table, the wall and CPU ratios sklearn / dr-scale, the relative log-loss difference, and the passes of (a).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

FEATURES, ACTIONS, SEED, TEST_FRACTION = 262144, 10, 0, 0.1


def split(url: str, which: str):
    from dr_scale.logs.filters import LogFilter
    from dr_scale.logs.opened import open_log

    return open_log(url, log_filter=LogFilter(split=which, test_fraction=TEST_FRACTION))


def read_rows(url: str):
    """(X csr, actions, propensities) of the rows ``url`` names, in memory."""
    import scipy.sparse as sp

    from dr_scale.logs.reading import read_log

    parts = read_log(url, n_features=FEATURES, n_actions=ACTIONS)
    return (sp.vstack([p.X for p in parts]).tocsr(), np.concatenate([p.action for p in parts]),
            np.concatenate([p.propensity for p in parts]))


def read_actions(url: str) -> np.ndarray:
    """The actions of the rows ``url`` names (their features not read)."""
    from dr_scale.logs.reading import read_log

    return np.concatenate([p.action for p in read_log(url, n_features=FEATURES, n_actions=ACTIONS,
                                                       with_features=False)])


def measured(started: float, cpu: float, **extra) -> dict:
    return {"wall": time.perf_counter() - started, "cpu": time.process_time() - cpu,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, **extra}


def run_ours(logs: str, lam: float, rtol: float | None, out: str) -> dict:
    from dr_scale import FitSettings, fit_propensity_model

    settings = FitSettings(lam=lam, **({} if rtol is None else {"rtol": rtol}))
    started, cpu = time.perf_counter(), time.process_time()
    model = fit_propensity_model(split(logs, "train"), settings)
    result = measured(started, cpu, passes=model.metadata["passes"], rtol=settings.rtol)
    model.save(out)
    return result


def run_sklearn(logs: str, lam: float, out: str, max_iter: int) -> dict:
    from sklearn.linear_model import LogisticRegression

    X, a, _ = read_rows(split(logs, "train"))
    started, cpu = time.perf_counter(), time.process_time()
    print(json.dumps({"fit_started_cpu": cpu}), flush=True)  # for the parent's --sklearn-timeout
    fit = LogisticRegression(solver="lbfgs", C=1.0 / lam, max_iter=max_iter).fit(X, a)
    result = measured(started, cpu, passes=int(np.max(fit.n_iter_)), converged=bool(np.max(fit.n_iter_) < max_iter))
    np.savez(out, coef=fit.coef_.T, intercept=fit.intercept_, classes=fit.classes_)
    return result


def vw_lines(X, a) -> list[str]:
    return [f"{int(a[i]) + 1} | " + " ".join(map(str, X.indices[X.indptr[i]:X.indptr[i + 1]]))
            for i in range(X.shape[0])]


def vw(arguments: str) -> None:
    """VW's own text driver (``vowpalwabbit.Workspace(...).run_parser()``) in a child process."""
    subprocess.run([sys.executable, "-c", "from vowpalwabbit import Workspace\n"
                    f"w = Workspace({arguments!r}); w.run_parser(); w.finish()"], check=True)


def run_vw(logs: str, folder: str) -> dict | None:
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return None
    train, test = os.path.join(folder, "vw-train.txt"), os.path.join(folder, "vw-test.txt")
    for url, path in ((split(logs, "train"), train), (split(logs, "test"), test)):
        if not os.path.exists(path):
            X, a, _ = read_rows(url)
            with open(path + ".tmp", "w") as f:
                f.write("\n".join(vw_lines(X, a)) + "\n")
            os.replace(path + ".tmp", path)
    model, predictions = os.path.join(folder, "vw.model"), os.path.join(folder, "vw-predictions.txt")
    started = time.perf_counter()
    before = os.times()
    vw(f"--oaa {ACTIONS} --loss_function logistic --probabilities -b 18 -d {train} -f {model} --quiet")
    after = os.times()
    wall = time.perf_counter() - started
    vw(f"-t -i {model} --probabilities -d {test} -p {predictions} --quiet")
    _, a, _ = read_rows(split(logs, "test"))
    probs = np.array([[float(t.split(":")[1]) for t in line.split()] for line in open(predictions)])
    return {"wall": wall, "cpu": after.children_user + after.children_system - before.children_user
            - before.children_system, "peak_rss_gib": float("nan"),
            "log_loss": float(-np.mean(np.log(np.maximum(probs[np.arange(a.size), a], 1e-15))))}


def held_out_log_loss(logs: str, coef, intercept) -> tuple[float, float, float]:
    """(the model's, the marginal frequencies', the true propensities') held-out log loss."""
    from scipy.special import log_softmax

    X, a, p = read_rows(split(logs, "test"))
    logp = log_softmax(np.asarray(X @ coef[:X.shape[1]]) + intercept, axis=1)
    a_train = read_actions(split(logs, "train"))
    share = np.bincount(a_train, minlength=ACTIONS) / a_train.size
    return (float(-logp[np.arange(a.size), a].mean()), float(-np.log(share[a]).mean()), float(-np.log(p).mean()))


def child(mode: str, args) -> None:
    """One measurement, in this process; its figures as one JSON line on stdout."""
    if mode == "ours":
        result = run_ours(args.logs, args.lam, args.rtol, args.model)
    else:
        result = run_sklearn(args.logs, args.lam, args.model, args.sklearn_max_iter)
    print(json.dumps(result))


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) of process ``pid`` so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_gib(pid: int) -> float:
    """The peak resident memory of process ``pid`` so far (VmHWM), GiB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 2 ** 20


def in_child(mode: str, logs: str, lam: float, rtol: float | None, model: str,
             timeout_cpu: float | None = None, max_iter: int = 100) -> dict:
    """The child's figures; with ``timeout_cpu``, the child is stopped once its fit has used that many CPU
    seconds, and the figures are those at the stop (``"stopped": True``: a lower bound of its time)."""
    argv = [sys.executable, os.path.abspath(__file__), "--child", mode, "--logs", logs, "--lam", str(lam), "--model",
            model, "--sklearn-max-iter", str(max_iter)] + ([] if rtol is None else ["--rtol", str(rtol)])
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=os.environ) as proc:
        if timeout_cpu is not None:
            first = proc.stdout.readline()  # the child's CPU when its fit starts (its reading not counted)
            fit_started_cpu = json.loads(first)["fit_started_cpu"]
            started = time.perf_counter()
            while proc.poll() is None:
                used = cpu_seconds(proc.pid) - fit_started_cpu
                if used > timeout_cpu:
                    rss = peak_rss_gib(proc.pid)
                    proc.kill()
                    proc.wait()
                    return {"wall": time.perf_counter() - started, "cpu": used, "peak_rss_gib": rss,
                            "stopped": True, "log_loss": float("nan")}
                time.sleep(1.0)
        out = proc.stdout.read()
        if proc.wait() != 0:
            raise subprocess.CalledProcessError(proc.returncode, argv)
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--data", default="data/bench-propensity")
    parser.add_argument("--lam", type=float, default=10.0)
    parser.add_argument("--rtol", type=float, default=None, help="the fitter's tolerance (default: FitSettings')")
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument("--sklearn-timeout", type=float, default=None, metavar="CPU_SECONDS",
                        help="stop scikit-learn's fit after this much CPU time and report it as a lower bound")
    parser.add_argument("--sklearn-max-iter", type=int, default=100, metavar="N",
                        help="scikit-learn's max_iter (default 100, its own default; 1000 lets it converge)")
    parser.add_argument("--child", choices=("ours", "sklearn"), help=argparse.SUPPRESS)
    parser.add_argument("--logs", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    os.makedirs(args.data, exist_ok=True)
    logs = os.path.join(args.data, f"log-{args.rows}")
    if not os.path.exists(os.path.join(logs, "_manifest.json")):
        from dr_scale.synthetic.bandit import generate_bandit

        generate_bandit(logs, rows=args.rows, features=FEATURES, actions=ACTIONS, seed=SEED, overwrite=True)
    print(f"{args.rows:,} rows ({1 - TEST_FRACTION:.0%} train), {FEATURES} features, {ACTIONS} actions, λ = "
          f"{args.lam:g} (C = {1 / args.lam:g}); load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = {}
    ours_model = os.path.join(args.data, "ours.npz")
    rows["dr-scale (L-BFGS, out of core)"] = in_child("ours", logs, args.lam, args.rtol, ours_model)
    from dr_scale import PropensityModel

    m = PropensityModel.load(ours_model)
    rows["dr-scale (L-BFGS, out of core)"]["log_loss"] = held_out_log_loss(logs, m.coef, m.intercept)[0]
    print(rows, flush=True)
    if not args.skip_sklearn:
        sk_model = os.path.join(args.data, "sklearn.npz")
        sk = in_child("sklearn", logs, args.lam, None, sk_model, args.sklearn_timeout, args.sklearn_max_iter)
        rows["scikit-learn lbfgs (in memory)"] = sk
        print(sk, flush=True)
        if sk.get("stopped"):
            _, marginal, truth = held_out_log_loss(logs, m.coef, m.intercept)
        else:
            z = np.load(sk_model)
            assert z["classes"].tolist() == list(range(ACTIONS))
            loss, marginal, truth = held_out_log_loss(logs, z["coef"], z["intercept"])
            sk["log_loss"] = loss
    else:
        _, marginal, truth = held_out_log_loss(logs, m.coef, m.intercept)
    vw = run_vw(logs, args.data)
    if vw is not None:
        rows["VW --oaa 10 logistic, one pass"] = vw
    print(f"\n{'':36} {'wall s':>8} {'CPU s':>8} {'peak RSS GiB':>13} {'passes':>7} {'held-out log loss':>18}")
    for name, r in rows.items():
        if r.get("converged") is False:
            name = name.replace("(in memory)", f"(max_iter {r['passes']})")
        print(f"{name:36} {r['wall']:8.1f} {r['cpu']:8.1f} {r['peak_rss_gib']:13.2f} {r.get('passes', '—'):>7} "
              f"{r['log_loss']:18.6f}")
    print(f"{'marginal action frequencies':36} {'':8} {'':8} {'':13} {'':>7} {marginal:18.6f}")
    print(f"{'true logging propensities':36} {'':8} {'':8} {'':13} {'':>7} {truth:18.6f}")
    ours = rows["dr-scale (L-BFGS, out of core)"]
    sk = rows.get("scikit-learn lbfgs (in memory)")
    if sk and sk.get("stopped"):
        print(f"\nscikit-learn's fit stopped unfinished after {sk['cpu']:.0f} CPU s (--sklearn-timeout): sklearn / "
              f"dr-scale ≥ {sk['cpu'] / ours['cpu']:.2f}× CPU, ≥ {sk['wall'] / ours['wall']:.2f}× wall; no log loss")
    elif sk:
        relative = (ours["log_loss"] - sk["log_loss"]) / sk["log_loss"]
        print(f"\nsklearn / dr-scale: wall {sk['wall'] / ours['wall']:.2f}×, CPU {sk['cpu'] / ours['cpu']:.2f}×; "
              f"held-out log loss (dr-scale − sklearn) / sklearn = {relative:+.4%}")
    if vw:
        print(f"held-out log loss (dr-scale − VW) / VW = {(ours['log_loss'] - vw['log_loss']) / vw['log_loss']:+.4%}")


if __name__ == "__main__":
    main()
