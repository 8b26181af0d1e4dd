"""The experiment's outputs: JSON, CSV, one PNG per panel of Fig. cv, a Markdown summary.

Every file is written atomically (``dr_scale.io.atomic``) into the output folder, at any
fsspec URL. The Markdown page sets the paper's claims beside the measured figures.
"""

from __future__ import annotations

import csv
import io
import posixpath

from dr_scale.io import strict_json
from dr_scale.io.atomic import atomic_write_all, url_to_fs
from dr_scale.synthetic.visits import PAPER_ROWS, TARGETS

PAPER = {"mean_rmse_reduction": 0.136, "reduction_range": (0.10, 0.20)}
CSV_COLUMNS = ("fraction", "repetitions", "mean_subsample", "mean_sampled", "ridge_r2", "ips_bias", "ips_std",
               "ips_rmse", "dr_bias", "dr_std", "dr_rmse", "dr_rmse_reduction")


def results_dict(result, data: str = "") -> dict:
    """The experiment's results as the JSON-ready dict of results.json: settings, calibration, timings and per
    fraction the IPS and DR bias and RMSE."""
    s = result.settings
    return {
        "data": data, "rows": result.n_rows, "features": result.n_features, "parts": result.n_parts,
        "settings": {"fractions": list(s.fractions), "repetitions": s.repetitions, "seed": s.seed, "lam": s.lam,
                     "kernel": s.kernel, "rtol": s.rtol},
        "truth": result.truth, "calibration": result.calibration, "paper": {**TARGETS, **PAPER},
        "per_fraction": result.per_fraction(), "mean_dr_rmse_reduction": result.mean_rmse_reduction(),
        "ridge_cg_iterations": result.ridge_iterations, "timings_seconds": result.timings,
        "per_fit": {"ips": result.ips.tolist(), "dr": result.dr.tolist(),
                    "subsample_size": result.subsample_size.tolist(), "sampled": result.sampled.tolist()},
    }


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _panel(rows: list[dict], metric: str, truth: float) -> bytes:
    from matplotlib.figure import Figure  # no pyplot, no backend: imported when the job's figures are drawn

    fig = Figure(figsize=(5.5, 3.8))
    ax = fig.subplots()
    f = [r["fraction"] for r in rows]
    for name, style in (("ips", "o--"), ("dr", "s-")):
        ax.plot(f, [r[f"{name}_{metric}"] for r in rows], style, label=name.upper())
    ax.set_xscale("log")
    if metric == "bias":
        ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("subsample fraction f")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} of IPS and DR (true mean visits {truth:.2f})")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    return buf.getvalue()


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def size_note(n_rows: int) -> str:
    """Whether the subsamples f·N have the paper's sizes (N = 3,854,689)."""
    if n_rows == PAPER_ROWS:
        return "the paper's N, so each fraction's subsamples have the paper's sizes"
    return (f"{n_rows / PAPER_ROWS:.3g} × the paper's N = {PAPER_ROWS:,}: each fraction's subsamples are "
            f"{n_rows / PAPER_ROWS:.3g} × the paper's sizes")


def summary_markdown(res: dict) -> str:
    """summary.md: the setting, the calibration and a table of IPS vs DR per fraction."""
    rows, cal = res["per_fraction"], res["calibration"]
    better = sum(r["dr_rmse"] < r["ips_rmse"] for r in rows)
    lines = [
        "# Average user visits: IPS vs DR (paper Sec. 5.2, Fig. cv)", "",
        f"Data: {res['data'] or 'in memory'} — {res['rows']:,} rows × {res['features']} features in "
        f"{res['parts']} parts ({size_note(res['rows'])}); {res['settings']['repetitions']} repetitions per fraction, "
        "seed "
        f"{res['settings']['seed']}, ridge λ = {res['settings']['lam']}, sampler kernel "
        f"'{res['settings']['kernel']}'.", "",
        "| | paper | measured |", "|---|---|---|",
        f"| true mean visits | 23.8 | {cal['true_mean']:.2f} |",
        f"| mean propensity | ≈ 1/4 (draft note) | {cal['mean_propensity']:.3f} |",
        f"| naive mean over sampled users | ≈ 29.5, a 24% bias (draft note) | {cal['naive_sampled_mean']:.2f}, "
        f"{_pct(cal['naive_bias'])} |",
        f"| DR rmse below IPS's | at every fraction | at {better} of {len(rows)} fractions |",
        f"| DR's rmse reduction | 10–20%, 13.6% on average | {_pct(min(r['dr_rmse_reduction'] for r in rows))} to "
        f"{_pct(max(r['dr_rmse_reduction'] for r in rows))}, {_pct(res['mean_dr_rmse_reduction'])} on average |",
        "", "| fraction | mean subsample | mean sampled | ridge R² | IPS bias | IPS std | IPS rmse | DR bias | DR std "
            "| DR rmse | DR rmse reduction |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['fraction']:g} | {r['mean_subsample']:.1f} | {r['mean_sampled']:.1f} | {r['ridge_r2']:.3f} "
                     f"| {r['ips_bias']:.3f} | {r['ips_std']:.3f} | {r['ips_rmse']:.3f} | {r['dr_bias']:.3f} "
                     f"| {r['dr_std']:.3f} | {r['dr_rmse']:.3f} | {_pct(r['dr_rmse_reduction'])} |")
    lines += ["", "Bias, std (over repetitions, ddof 0) and rmse are of the estimate minus the true mean; "
                  "ridge R² is the first repetition's fit evaluated on all rows.", "",
              "![rmse](rmse.png)", "", "![bias](bias.png)", "",
              "Timings (s): " + ", ".join(f"{k} {v}" for k, v in res["timings_seconds"].items()), ""]
    return "\n".join(lines)


def write_outputs(result, out: str, *, data: str = "", storage_options: dict | None = None) -> list[str]:
    """Write results.json, results.csv, rmse.png, bias.png and summary.md into ``out``."""
    res = results_dict(result, data)
    fs, root = url_to_fs(out, storage_options)
    files: dict[str, bytes | str] = {
        "results.json": strict_json.dumps(res, indent=2),
        "results.csv": _csv(res["per_fraction"]),
        "rmse.png": _panel(res["per_fraction"], "rmse", result.truth),
        "bias.png": _panel(res["per_fraction"], "bias", result.truth),
        "summary.md": summary_markdown(res),
    }
    staged = {posixpath.join(root, name): content for name, content in files.items()}
    atomic_write_all(fs, staged)  # all staged before any is renamed: a failure keeps the old results whole
    return list(staged)
