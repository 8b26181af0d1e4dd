"""Reports of the classification experiments: CSV, JSON, Markdown beside the paper's numbers, PNG plots.

``PAPER_TABLE2`` and ``PAPER_TABLE3`` are transcribed from the paper's LaTeX source
(Tables ``tbl:class-eval`` and ``tbl:class-opt``; a test checks the transcription
against the source when it is available).
"""

from __future__ import annotations

import io
import posixpath

import numpy as np
import pandas as pd

from dr_scale.experiments.classification.datasets import NAMES
from dr_scale.io import strict_json
from dr_scale.io.atomic import atomic_write_all, url_to_fs

_T2 = {
    "bias (IPS)": [0.004, 0.003, 0, 0, 0, 0, 0, 0, 0.006],
    "bias (DR)": [0.002, 0.001, 0.001, 0, 0, 0, 0, 0.001, 0.007],
    "bias (DM)": [0.129, 0.147, 0.213, 0.175, 0.063, 0.208, 0.174, 0.281, 0.193],
    "rmse (IPS)": [0.137, 0.194, 0.049, 0.023, 0.012, 0.015, 0.021, 0.062, 0.099],
    "rmse (DR)": [0.101, 0.142, 0.03, 0.023, 0.011, 0.016, 0.019, 0.058, 0.076],
    "rmse (DM)": [0.129, 0.147, 0.213, 0.175, 0.063, 0.208, 0.174, 0.281, 0.193],
}
_T3 = {
    "IPS (DLM)": [0.52933, 0.6738, 0.93015, 0.64403, 0.08913, 0.5358, 0.40223, 0.39507, 0.72973],
    "DR (DLM)": [0.28853, 0.50157, 0.60704, 0.09033, 0.0831, 0.12663, 0.17133, 0.31603, 0.5292],
    "IPS (FT)": [0.46563, 0.90783, 0.9393, 0.84017, 0.3701, 0.73123, 0.69313, 0.63517, 0.81147],
    "DR (FT)": [0.32583, 0.45807, 0.47197, 0.17793, 0.05283, 0.0956, 0.18647, 0.38753, 0.59053],
    "Offset Tree": [0.34007, 0.52843, 0.5837, 0.3251, 0.04483, 0.15003, 0.20957, 0.37847, 0.5895],
}
#: Table 2: row label -> {data set: value}
PAPER_TABLE2 = {row: dict(zip(NAMES, values)) for row, values in _T2.items()}
#: Table 3: method -> {data set: mean test error over 30 repetitions}
PAPER_TABLE3 = {row: dict(zip(NAMES, values)) for row, values in _T3.items()}


# -- checks against the paper's conclusions ---------------------------------------
def evaluation_checks(summary: pd.DataFrame, family_alpha: float = 0.01) -> dict:
    """Table 2's conclusions, checked on a run's summary.

    * DM's |bias| is far above IPS's and DR's: more than 3× the larger of the two;
    * IPS and DR are unbiased: every |bias| is within z Monte-Carlo standard errors of
      zero, z = Φ⁻¹(1 − α/(2m)) for the m = 2 × (data sets) tests at family-wise level α
      (Bonferroni; z ≈ 3.45 for nine sets at α = 0.01), with the largest |bias|/se reported;
    * DR's rmse ≤ IPS's on all data sets but at most one (8 of 9 in the paper).
    """
    from scipy.stats import norm

    table = summary.pivot(index="dataset", columns="estimator", values=["bias", "bias_se", "rmse"])
    bias, se, rmse = table["bias"].abs(), table["bias_se"], table["rmse"]
    dm_far = bias["DM"] > 3 * bias[["IPS", "DR"]].max(axis=1)
    n = len(table)
    z = float(norm.ppf(1 - family_alpha / (4 * n)))
    ratio = (bias[["IPS", "DR"]] / se[["IPS", "DR"]]).max(axis=1)
    unbiased = ratio <= z
    dr_better = rmse["DR"] <= rmse["IPS"]
    return {
        "dm_bias_far_above": {"pass": bool(dm_far.all()), "failing": list(dm_far.index[~dm_far])},
        "ips_dr_unbiased": {"pass": bool(unbiased.all()), "z": round(z, 3), "family_alpha": family_alpha,
                            "max_abs_bias_over_se": {d: round(float(v), 2) for d, v in ratio.items()},
                            "failing": list(unbiased.index[~unbiased])},
        "dr_rmse_le_ips": {"pass": bool(dr_better.sum() >= n - 1), "count": int(dr_better.sum()), "of": n,
                           "failing": list(dr_better.index[~dr_better])},
    }


def optimization_checks(summary: pd.DataFrame) -> dict:
    """Table 3's conclusions: DR below IPS for both learners everywhere; DR vs the Offset Tree."""
    table = summary.pivot(index="dataset", columns="method", values="error")
    dlm = table["DR (DLM)"] < table["IPS (DLM)"]
    ft = table["DR (FT)"] < table["IPS (FT)"]
    best_dr = table[["DR (DLM)", "DR (FT)"]].min(axis=1)
    return {
        "dr_dlm_below_ips_dlm": {"pass": bool(dlm.all()), "failing": list(dlm.index[~dlm])},
        "dr_ft_below_ips_ft": {"pass": bool(ft.all()), "failing": list(ft.index[~ft])},
        "dr_ft_vs_offset_tree": {"better": list(table.index[table["DR (FT)"] < table["Offset Tree"]]),
                                 "worse": list(table.index[table["DR (FT)"] >= table["Offset Tree"]])},
        "best_dr_vs_offset_tree": {"better": list(table.index[best_dr < table["Offset Tree"]]),
                                   "worse": list(table.index[best_dr >= table["Offset Tree"]])},
    }


# -- tables beside the paper ------------------------------------------------------
def evaluation_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows like the paper's Table 2 (bias/rmse per estimator), measured and paper values per data set."""
    rows = []
    for quantity in ("bias", "rmse"):
        for est in ("IPS", "DR", "DM"):
            label = f"{quantity} ({est})"
            part = summary[summary["estimator"] == est].set_index("dataset")
            for name in part.index:
                value = part.loc[name, quantity]
                rows.append({"row": label, "dataset": name, "measured": abs(value) if quantity == "bias" else value,
                             "measured_se": part.loc[name, "bias_se"] if quantity == "bias" else np.nan,
                             "paper": PAPER_TABLE2[label].get(name, np.nan)})
    for est in ("IPS", "DR"):  # the exact spread over conversions, for comparison with the rmse
        part = summary[summary["estimator"] == est].set_index("dataset")
        for name in part.index:
            rows.append({"row": f"sd exact ({est})", "dataset": name, "measured": part.loc[name, "sd_theory"],
                         "measured_se": np.nan, "paper": np.nan})
    return pd.DataFrame(rows)


def optimization_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows like the paper's Table 3: mean test error per method, measured and paper values."""
    out = summary.rename(columns={"method": "row", "error": "measured", "error_se": "measured_se"})
    out["paper"] = [PAPER_TABLE3[m].get(d, np.nan) for m, d in zip(out["row"], out["dataset"])]
    return out[["row", "dataset", "measured", "measured_se", "paper", "repetitions"]]


def markdown(table: pd.DataFrame, digits: int = 3) -> str:
    """A Markdown table with one row per quantity and "measured (paper)" cells per data set."""
    names = [n for n in NAMES if n in set(table["dataset"])] + sorted(set(table["dataset"]) - set(NAMES))
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, group in table.groupby("row", sort=False):
        cells = group.set_index("dataset")
        row = []
        for name in names:
            measured, paper = cells.loc[name, "measured"], cells.loc[name, "paper"]
            cell = f"{measured:.{digits}f}"
            row.append(f"{cell} ({paper:.{digits}f})" if np.isfinite(paper) else cell)
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# -- plots ----------------------------------------------------------------------------
def bar_plot(table: pd.DataFrame, panels: list[tuple[str, list[str]]], title: str) -> bytes:
    """Grouped bars per data set (one panel per (ylabel, rows)), measured bars with the paper's as dots; PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in NAMES if n in set(table["dataset"])] + sorted(set(table["dataset"]) - set(NAMES))
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.2 * len(panels)), squeeze=False)
    x = np.arange(len(names))
    for ax, (ylabel, rows) in zip(axes[:, 0], panels):
        width = 0.8 / len(rows)
        for j, label in enumerate(rows):
            cells = table[table["row"] == label].set_index("dataset").reindex(names)
            pos = x - 0.4 + width * (j + 0.5)
            se = cells["measured_se"]
            ax.bar(pos, cells["measured"], width, label=label, yerr=None if se.isna().all() else se.fillna(0),
                   capsize=2)
            ax.plot(pos, cells["paper"], "o", color="black", markersize=3,
                    label="paper" if j == 0 else None, zorder=3)
        ax.set_xticks(x, names, rotation=20)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, ncol=len(rows) + 1)
    axes[0, 0].set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def write_report(folder: str, stem: str, summary: pd.DataFrame, table: pd.DataFrame, records: list[dict],
                 checks: dict, meta: dict, plot_panels, title: str, storage_options: dict | None = None) -> list[str]:
    """Write STEM.csv (table beside the paper), STEM_summary.csv, STEM_repetitions.csv, STEM.json,
    STEM.md and STEM.png into ``folder``; all are staged before any is renamed into place
    (``atomic_write_all``), so a failure leaves the previous report whole. Returns the paths."""
    fs, root = url_to_fs(folder, storage_options)
    files = {
        f"{stem}.csv": table.to_csv(index=False),
        f"{stem}_summary.csv": summary.to_csv(index=False),
        f"{stem}_repetitions.csv": pd.DataFrame(records).to_csv(index=False),
        f"{stem}.json": strict_json.dumps({"meta": meta, "checks": checks, "summary": summary.to_dict(orient="records"),
                                    "table": table.replace({np.nan: None}).to_dict(orient="records")},
                                   indent=2, default=_jsonable),
        f"{stem}.md": (f"# {title}\n\nmeasured (paper) per data set; {meta.get('description', '')}\n\n"
                       + markdown(table) + "\n## Checks against the paper's conclusions\n\n```json\n"
                       + strict_json.dumps(checks, indent=2, default=_jsonable) + "\n```\n\n"
                       + f"![{stem}]({stem}.png)\n"),
        f"{stem}.png": bar_plot(table, plot_panels, title),
    }
    staged = {posixpath.join(root, name): data for name, data in files.items()}
    atomic_write_all(fs, staged)
    return list(staged)


def _jsonable(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"not JSON serialisable: {type(value)}")
