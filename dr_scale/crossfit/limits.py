"""A fit's work bounded before it starts: the folds its rows allow, a declared or plausible d, and its size.

* ``folds`` K: 2 ≤ K ≤ min(:data:`MAX_FOLDS`, rows / :data:`MIN_FOLD_ROWS`) (each fold model is fitted without one
  fold's rows; folds of a few rows cost a model each and as many passes as folds of many);
* d: the declared one (``n_features``, else the log's metadata), else the largest feature id + 1 — refused above
  :data:`MAX_INFERRED_FEATURES` unless ``n_features`` says so (a stray id of 10⁷ would silently make a model of 10⁷
  rows);
* the size, once the features the rows use are known (:func:`check_fit_size`): F fits of c coefficients each,
  P = F·c parameters, announced with a warning above :data:`LARGE_FIT` and refused when the solver's copies of
  them, :data:`COPIES` × 8·P bytes, exceed this machine's memory.

:func:`check_fit_limits` reads only the opened log's footers (:attr:`~dr_scale.logs.opened.OpenedLog.footprint`,
read once); the commands call it before they start a cluster, and :func:`~dr_scale.crossfit.engine.fit_log` before
it reads a row, so the Python fitters are bounded alike.
"""

from __future__ import annotations

import os
import warnings

from dr_scale.core.errors import ParameterError

#: Without a declared d (the log's ``dr_scale.n_features`` metadata or ``n_features``), d is inferred as the
#: largest feature id + 1 only up to this; beyond it a stray id would silently size the model.
MAX_INFERRED_FEATURES = 1 << 20
#: A cross-fitting fold holds at least this many rows on average: ``folds`` K ≤ rows / MIN_FOLD_ROWS. Each fold
#: costs a model and its share of every pass; folds of a few rows cost a pass each and predict from models that
#: differ by a handful of rows.
MIN_FOLD_ROWS = 10
#: At most this many cross-fitting folds: at K = 20 each fold model is fitted on 95% of the rows already, and the
#: work of a fit grows faster than K (the λ search fits every fold too): 2,000 rows of 0/1 rewards take ~4 s of CPU
#: at K = 10, ~11 s at K = 20, ~35 s at K = 40.
MAX_FOLDS = 20
#: Parameters (the coefficients of all fits, after sizing by use) above which a fit is announced with a warning
#: before its first solve: 10^8 float64 are 0.75 GiB a copy.
LARGE_FIT = 10**8
#: The copies of the parameters a solve holds at most: L-BFGS's history of 10 (s, y) pairs and six working vectors
#: (x, g, the direction, the trial point, its gradient, the preconditioner); conjugate gradients hold fewer.
COPIES = 26


def check_fit_limits(logs, *, folds: int | None, n_features: int | None) -> None:
    """The folds and d of a fit on the opened log ``logs``, checked from its footers (module docstring); errors
    name the parameter."""
    foot = logs.footprint
    if folds and folds > MAX_FOLDS:
        raise ParameterError(f"`folds` = {folds}: at most {MAX_FOLDS} cross-fitting folds (each fold model already "
                             f"sees {1 - 1 / MAX_FOLDS:.0%} of the rows at K = {MAX_FOLDS}, and every fold adds a "
                             "model to each pass); give 2 ≤ K ≤ 20")
    if folds and folds * MIN_FOLD_ROWS > foot.rows:
        raise ParameterError(f"`folds` = {folds} leaves {foot.rows / folds:,.3g} rows a fold of the log's "
                             f"{foot.rows:,} rows; cross-fitting needs 2 ≤ K ≤ rows / {MIN_FOLD_ROWS} "
                             f"(here {foot.rows // MIN_FOLD_ROWS:,}): at least {MIN_FOLD_ROWS} rows a fold")
    d = n_features or foot.metadata.get("n_features")
    if d is None and foot.max_feature is not None and foot.max_feature + 1 > MAX_INFERRED_FEATURES:
        raise ParameterError(f"{logs}: the log declares no number of features (no dr_scale.n_features metadata) and "
                             f"its largest feature id is {foot.max_feature:,}: d would be {foot.max_feature + 1:,}. "
                             f"Give `n_features` if that is right, or fix the stray feature id")


def check_fit_size(label: str, fits: int, coefficients: int) -> None:
    """``fits`` fits of ``coefficients`` coefficients each (the features the rows use): a warning with the count
    above :data:`LARGE_FIT` parameters, a ``ParameterError`` when :data:`COPIES` copies exceed this machine's
    memory (module docstring)."""
    parameters = fits * coefficients
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        have = None
    need = COPIES * 8 * parameters
    if have is not None and need > have:
        raise ParameterError(f"{label}: {parameters:,} parameters ({fits} fits × {coefficients:,} coefficients, the "
                             f"features the rows use) need about {need / 2**30:,.1f} GiB to fit; this machine has "
                             f"{have / 2**30:,.1f} GiB: fewer `folds`, fewer actions or a smaller hash_bits")
    if parameters > LARGE_FIT:
        warnings.warn(f"{label}: {parameters:,} parameters ({fits} fits × {coefficients:,} coefficients), "
                      f"{8 * parameters / 2**30:,.1f} GiB a copy; the fit holds several copies (docs/reward-models.md, "
                      "\"How big a fit is\"): fewer folds, fewer actions or a smaller hash_bits make it smaller",
                      stacklevel=3)
