"""L2-regularised logistic regression, many fits at once, each pass over the data one loss-and-gradient.

Two forms, both with an unpenalised intercept and the penalty convention of scikit-learn's
``LogisticRegression(C=1/λ)``:

* **binary** (one reward model per action and fold): for fit F on rows S_F with labels y_i ∈ {0, 1},

      L_F(w, b) = Σ_{i∈S_F} [log(1 + e^{z_i}) − y_i z_i] + (λ/2) ‖w‖²,      z_i = x_i·w + b;

* **multinomial** (the logging policy π₀(a | x) over k actions, one model per fold), on rows with logged
  actions a_i,

      L_F(W, b) = Σ_{i∈S_F} [log Σ_a e^{z_ia} − z_{i a_i}] + (λ/2) ‖W‖²_F,    z_ia = x_i·W[:, a] + b_a.

**The method: limited-memory BFGS (Nocedal & Wright 2006, Alg. 7.4 and 7.5), every fit with its own
history and step, in lockstep.** A pass over the parts evaluates (L_F, ∇L_F) of every unfinished fit at its
current point — the caller's ``evaluate``, a map-reduce pass (:mod:`dr_scale.outofcore.passes`) or in
memory — and each fit then takes its step (accepted by Armijo's rule, L(x + tp) ≤ L(x) + 10⁻⁴ t ∇L·p,
else backtracked by a safeguarded quadratic interpolation: one more pass). Why L-BFGS rather than
Newton–CG with Hessian-vector products by passes: the cost that matters is passes over the data, and a
Newton–CG step needs one pass for the gradient plus one per inner CG iteration (5–20 on these
problems), while an L-BFGS step needs one pass (its unit step is accepted almost always), with a
curvature model built from the same gradients; the measured counts are in docs/benchmarks.md. The
price is memory: ``memory`` pairs (s, y) of the fit's parameter size per fit, held by the driver — :data:`MEMORY`,
fewer where all fits' pairs would pass :data:`HISTORY_BYTES` (:func:`history_pairs`) — in float32
(:func:`history_dtype`) for every tolerance rtol ≥ :data:`FLOAT32_HISTORY_RTOL`, half of float64's bytes: the
pairs only shape the curvature model (the two-loop recursion runs in float64 on them, ρ = 1/sᵀy from the stored
pair, so the model stays positive definite), while the point, the gradient and the stopping rule stay float64,
so the minimiser reached is float64's. A pair rounded to float32 (relative error 6·10⁻⁸) still models curvature
far better than a gradient reduced to 10⁻⁶ needs; below that the rounding can stall the steps, so tighter
tolerances keep the pairs in float64.

Each fit's objective is divided by its rows, max(n_F, 1), so that the fits' scales match (the minimiser is
unchanged). **Stopping rule**: fit F stops when ‖∇L_F(x)‖₂ ≤ rtol · ‖∇L_F(x₀)‖₂ — the relative residual
of conjugate gradients' rule for ridge (:mod:`dr_scale.outofcore.ridge`; the gradient is the residual of
the normal equations there) — or after ``max_iter`` passes. Since L_F is λ/n_F-strongly convex in w,
‖x − x*‖ ≤ ‖∇L_F(x)‖ / μ with μ the least curvature on the segment — the tolerance the tests derive.

The start x₀: w = 0 and the intercepts of the constant model (b = logit of the fit's mean label;
b_a = log of the action's share), where the intercepts' gradient is zero. Coordinates marked not ``free``
stay at x₀ (the multinomial model's actions a fit has no rows of).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit

from dr_scale.outofcore.products import add_transposed_product, add_transposed_products
from dr_scale.outofcore.progress import Passes

#: Pairs (s, y) each fit's curvature model keeps (:func:`history_pairs`: fewer for a large problem).
MEMORY = 10
#: The fewest pairs a large problem's fits keep.
MIN_MEMORY = 3
#: The bytes the pairs of all fits may hold before each fit keeps fewer than MEMORY (:func:`history_pairs`).
HISTORY_BYTES = 640 * 2 ** 20
#: The least rtol whose solves keep their pairs (s, y) in float32 (module docstring).
FLOAT32_HISTORY_RTOL = 1e-6


def history_dtype(rtol: float) -> type:
    """The type a solve to ``rtol`` keeps its pairs (s, y) in: float32 for rtol ≥ :data:`FLOAT32_HISTORY_RTOL`,
    else float64 (module docstring).

    >>> history_dtype(1e-2).__name__, history_dtype(1e-10).__name__
    ('float32', 'float64')
    """
    return np.float32 if rtol >= FLOAT32_HISTORY_RTOL else np.float64
ARMIJO = 1e-4


@dataclass
class GLMFit:
    """The solutions x (F, D), the passes taken, which fits met the stopping rule, and ‖∇L_F‖ / ‖∇L_F(x₀)‖."""

    x: np.ndarray
    passes: int
    converged: np.ndarray
    relative_gradient: np.ndarray
    loss: np.ndarray


def history_pairs(size: int, dtype: type) -> int:
    """The pairs (s, y) a fit keeps when F fits of D coordinates (``size`` = F·D) keep theirs in ``dtype``:
    :data:`MEMORY`, or fewer (at least :data:`MIN_MEMORY`) where MEMORY pairs would hold more than
    :data:`HISTORY_BYTES` — a larger problem's curvature model from its most recent pairs, a few more passes
    rather than a working set beyond a worker's memory.

    >>> history_pairs(60 * 1000, np.float32), history_pairs(60 * 253_741, np.float32)
    (10, 5)
    """
    per_pair = 2 * size * np.dtype(dtype).itemsize
    return int(min(MEMORY, max(MIN_MEMORY, HISTORY_BYTES // max(per_pair, 1))))


def minimize(evaluate, x0: np.ndarray, *, rtol: float, max_iter: int, free: np.ndarray | None = None,
             curvature: np.ndarray | None = None, memory: int | None = None, progress: bool = False,
             description: str = "logistic") -> GLMFit:
    """Minimise F smooth convex functions at once by L-BFGS in lockstep (module docstring).

    ``evaluate(X, active)`` returns (f (F,), g (F, D)) at the rows of X (F, D) for the fits where ``active`` is
    true (others: anything) — one pass over the data; g may be overwritten. ``free`` (F, D) bool: the coordinates
    that move (the history holds only the coordinates some fit moves: features no row has cost nothing).
    ``curvature`` (F, D), float32: an estimate of the Hessian's diagonal, the preconditioner H₀ = γ diag(curvature)⁻¹
    (γ = sᵀy / yᵀH₀y of the newest pair; the first step is −diag(curvature)⁻¹∇L) — for sparse features whose
    frequencies span orders of magnitude, the curvature of a weight is its feature's count times p(1 − p) plus λ,
    and a scalar H₀ would take steps sized for the commonest feature on all of them. ``memory``: the pairs (s, y)
    each fit keeps (None: :func:`history_pairs`).

    The working set is the history's pairs, three (F, D) float64 arrays (the point, the gradient, the trial point),
    two float32 ones (the direction and the preconditioner: a direction rounded to float32 is still a descent
    direction, its slope ∇L·p and the trial point x + tp computed from the rounded one) and ``evaluate``'s own (its
    pass's sums, the gradient it returns, which is taken over until the step is taken): ``x0`` and a float32
    ``curvature`` are taken over (overwritten), not copied.
    """
    full = np.asarray(x0, dtype=np.float64)
    F, D = full.shape
    free = np.ones((F, D), bool) if free is None else np.asarray(free, bool)
    moved = free.any(axis=0)
    everything = bool(moved.all())  # every coordinate moves: the solver's vectors are the caller's, no copies
    idx = slice(None) if everything else np.flatnonzero(moved)  # the coordinates some fit moves
    free = free if everything else free[:, idx]
    x = full if everything else full[:, idx]
    if curvature is None:
        inverse = np.ones(x.shape, np.float32)
    else:
        inverse = np.asarray(curvature, dtype=np.float32)[:, idx]  # a view when every coordinate moves
        np.maximum(inverse, 1e-12, out=inverse)
        np.divide(1.0, inverse, out=inverse)

    def evaluated(trial, which):
        """The loss and gradient at ``trial`` for the free coordinates (the fixed ones held, their gradient 0)."""
        if everything:
            f_, g_ = evaluate(trial, which)
        else:
            full[:, idx] = trial
            f_, g_ = evaluate(full, which)
            g_ = g_[:, idx]
        g_[~free] = 0.0
        return f_, g_

    active = free.any(axis=1)
    f, g = evaluated(x, active)
    passes = 1
    g0 = np.linalg.norm(g, axis=1)
    gnorm = g0.copy()
    done = ~active | (gnorm <= rtol * g0) | (g0 == 0)
    D = x.shape[1]
    kept = history_dtype(rtol)
    memory = history_pairs(F * D, kept) if memory is None else memory
    S: np.ndarray = np.zeros((F, memory, D), kept)
    Y: np.ndarray = np.zeros((F, memory, D), kept)
    rho = np.zeros((F, memory))
    stored = np.zeros(F, np.int64)  # pairs in the history (the newest at index (stored − 1) % memory)
    p = np.zeros((F, D), np.float32)  # the direction: float32's rounding turns it by 6·10⁻⁸, the step is x + tp
    trial = np.empty((F, D))
    t = np.ones(F)
    slope = np.zeros(F)
    bar = Passes(f"{description}: {F} fits by L-BFGS", progress)

    def directions(rows):
        """L-BFGS directions −H g for the fits ``rows``: the two-loop recursion over the stored (s, y) pairs (Nocedal
        & Wright, Alg. 7.4)."""
        for F_ in rows:
            q = g[F_].copy()
            m = min(stored[F_], memory)
            order = [(stored[F_] - 1 - j) % memory for j in range(m)]
            alpha = np.empty(m)
            for j, i in enumerate(order):  # float64 arithmetic on the kept pairs (no copy of float64 ones)
                alpha[j] = rho[F_, i] * (np.asarray(S[F_, i], np.float64) @ q)
                q -= alpha[j] * np.asarray(Y[F_, i], np.float64)
            if m:
                s_newest, y_newest = np.asarray(S[F_, order[0]], np.float64), np.asarray(Y[F_, order[0]], np.float64)
                q *= inverse[F_] * ((s_newest @ y_newest) / (y_newest @ (inverse[F_] * y_newest)))
            elif curvature is not None:  # the first step: the preconditioned gradient
                q *= inverse[F_]
            else:  # the first step: length 1 in the gradient's direction scaled to ‖g‖ = 1 (as scipy's L-BFGS)
                q /= max(gnorm[F_], 1e-300)
            for j, i in reversed(list(enumerate(order))):
                beta = rho[F_, i] * (np.asarray(Y[F_, i], np.float64) @ q)
                q += (alpha[j] - beta) * np.asarray(S[F_, i], np.float64)
            p[F_] = -q
            slope[F_] = g[F_] @ p[F_]
            if slope[F_] >= 0:  # not a descent direction (lost curvature): restart from the gradient
                stored[F_] = 0
                p[F_] = -g[F_] / max(gnorm[F_], 1e-300)
                slope[F_] = g[F_] @ p[F_]
            t[F_] = 1.0

    directions(np.flatnonzero(~done))
    while not done.all() and passes < max_iter:
        trying = ~done
        np.multiply(p, t[:, None], out=trial)
        trial += x
        trial[~trying] = x[~trying]
        f_new, g_new = evaluated(trial, trying)
        passes += 1
        accept = trying & (f_new <= f + ARMIJO * t * slope)
        for F_ in np.flatnonzero(trying & ~accept):  # backtrack: the minimiser of the quadratic through f, slope
            denominator = 2 * (f_new[F_] - f[F_] - slope[F_] * t[F_]) if np.isfinite(f_new[F_]) else np.inf
            step = -slope[F_] * t[F_] ** 2 / denominator if denominator > 0 else 0.5 * t[F_]
            t[F_] = min(max(step, 0.1 * t[F_]), 0.5 * t[F_])
            if t[F_] < 1e-20:  # no decrease along p in floating point: as converged as it gets
                done[F_] = True
        rows = np.flatnonzero(accept)
        for F_ in rows:
            s = np.asarray((trial[F_] - x[F_]).astype(kept, copy=False), np.float64)  # the pair as it is kept
            yv = np.asarray((g_new[F_] - g[F_]).astype(kept, copy=False), np.float64)
            sy = s @ yv
            if sy > 1e-12 * (yv @ yv):
                i = stored[F_] % memory
                S[F_, i], Y[F_, i], rho[F_, i] = s, yv, 1.0 / sy
                stored[F_] += 1
            x[F_], f[F_], g[F_] = trial[F_], f_new[F_], g_new[F_]
            gnorm[F_] = np.linalg.norm(g[F_])
            if gnorm[F_] <= rtol * g0[F_]:
                done[F_] = True
        del g_new  # taken over: the next pass's arrays are not allocated beside it
        directions([F_ for F_ in rows if not done[F_]])
        bar.step(f"{int((~done).sum())} of {F} fits not yet converged")
    bar.close()
    converged = ~active | (gnorm <= rtol * g0) | (g0 == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.where(g0 > 0, gnorm / np.where(g0 > 0, g0, 1.0), 0.0)
    if not everything:
        full[:, idx] = x
    return GLMFit(full, passes, converged, relative, f)


# -- the binary model's terms -----------------------------------------------------------------
def add_binary_terms(loss: np.ndarray, grad: np.ndarray, X, y: np.ndarray, w: np.ndarray, b: float, F: int,
                     prior: float = 0.0, centre: float = 0.0) -> None:
    """loss[F] += Σ_i log(1 + e^{z_i}) − y_i z_i and grad[F] += (Xᵀ(σ(z) − y), Σ(σ(z) − y)), z = Xw + b;
    grad[F] holds (w's d entries, b). With ``prior`` c > 0, each row also counts c pseudo-rows of label ``centre``
    p̄ at its x (a conjugate prior, :func:`dr_scale.reward.fitting.rate_prior`): the terms of
    Σ_i (1 + c) log(1 + e^{z_i}) − (y_i + c p̄) z_i."""
    if X.shape[0] == 0:
        return
    z = X @ w + b
    if prior:
        loss[F] -= float(np.sum((1.0 + prior) * log_expit(-z) + (y + prior * centre) * z))
        residual = (1.0 + prior) * expit(z) - (y + prior * centre)
    else:
        loss[F] -= float(np.sum(log_expit(np.where(y > 0, z, -z))))
        residual = expit(z) - y
    add_transposed_product(grad[F, :-1], X, residual)
    grad[F, -1] += float(residual.sum())


def add_multinomial_terms(loss: np.ndarray, grad: np.ndarray, X, a: np.ndarray, W: np.ndarray, b: np.ndarray,
                          F: int) -> None:
    """loss[F] += Σ_i log Σ_a e^{z_ia} − z_{i a_i} and grad[F] += (Xᵀ(softmax(z) − onehot(a)), Σ_i …), z = XW + b;
    grad[F] holds W (d, k) row-major then b (k)."""
    n = X.shape[0]
    if n == 0:
        return
    k = b.shape[0]
    Z = np.asarray(X @ W) + b
    rows = np.arange(n)
    # log Σ_a e^{z_a} = m + log Σ_a e^{z_a − m} and softmax(z) = e^{z − m} / Σ_a e^{z_a − m}, m = max_a z_a: one
    # exp for both (scipy's logsumexp then a second exp take 2.6× the time on 65,536 × 10 chunks)
    top = Z.max(axis=1)
    G = Z - top[:, None]
    np.exp(G, out=G)
    total = G.sum(axis=1)
    loss[F] += float(np.sum(top + np.log(total) - Z[rows, a]))
    G /= total[:, None]
    G[rows, a] -= 1.0
    d = W.shape[0]
    add_transposed_products(grad[F, :d * k].reshape(d, k), X, G)
    grad[F, d * k:] += G.sum(axis=0)


def penalised(data_loss: np.ndarray, data_grad: np.ndarray, x: np.ndarray, lam, n: np.ndarray,
              penalty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L_F / max(n_F, 1), ∇L_F / max(n_F, 1)): the data terms plus (λ/2)‖w‖² over the coordinates where
    ``penalty`` (D,) is true (not the intercepts). The gradient is ``data_grad`` itself, overwritten: at F·D of
    tens of millions each (F, D) array is a hundred MB, so the penalty is added one fit's row at a time."""
    lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), n.shape)
    scale = 1.0 / np.maximum(n, 1.0)
    loss = np.array(data_loss, dtype=np.float64)
    for F in range(x.shape[0]):
        xw = x[F] * penalty
        loss[F] = (loss[F] + 0.5 * lam[F] * (xw @ xw)) * scale[F]
        xw *= lam[F]
        data_grad[F] += xw
        data_grad[F] *= scale[F]
    return loss, data_grad


def logit(p):
    """logit(p) = log p − log(1 − p), the inverse of σ."""
    return np.log(p) - np.log1p(-p)


def smoothed_rate(successes, n):
    """(s + ½)/(n + 1): the rate of a fit whose labels are all equal (or that has none), whose maximum-likelihood
    intercept would be ±∞ (the Krichevsky–Trofimov estimate)."""
    return (np.asarray(successes, dtype=np.float64) + 0.5) / (np.asarray(n, dtype=np.float64) + 1.0)


# -- in memory (tests, small data) -------------------------------------------------------------
def fit_binary_in_memory(X, y, lam: float, *, rtol: float = 1e-8, max_iter: int = 1000) -> GLMFit:
    """One binary fit on in-memory rows (X (n, d) sparse or dense, y ∈ {0, 1}), through :func:`minimize`;
    x = (w, b)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, d = X.shape
    mean = y.mean() if n else 0.5
    x0 = np.zeros((1, d + 1))
    x0[0, -1] = logit(np.clip(mean, 1e-12, 1 - 1e-12))
    penalty = np.r_[np.ones(d, bool), False]

    def evaluate(x, active):
        """The penalised logistic loss and its gradient at x = (w, b)."""
        loss, grad = np.zeros(1), np.zeros((1, d + 1))
        add_binary_terms(loss, grad, X, y, x[0, :-1], x[0, -1], 0)
        return penalised(loss, grad, x, lam, np.array([n], float), penalty)

    return minimize(evaluate, x0, rtol=rtol, max_iter=max_iter)


def fit_multinomial_in_memory(X, a, k: int, lam: float, *, rtol: float = 1e-8, max_iter: int = 1000) -> GLMFit:
    """One multinomial fit on in-memory rows (actions a ∈ [0, k)); x = (W (d, k) row-major, b (k))."""
    X = sp.csr_matrix(X, dtype=np.float64)
    a = np.asarray(a, dtype=np.int64)
    n, d = X.shape
    counts = np.bincount(a, minlength=k).astype(float)
    x0, free = multinomial_start(counts[None, :], d)
    penalty = np.r_[np.ones(d * k, bool), np.zeros(k, bool)]

    def evaluate(x, active):
        """The penalised multinomial (softmax) loss and its gradient at x = (W, b)."""
        loss, grad = np.zeros(1), np.zeros((1, (d + 1) * k))
        add_multinomial_terms(loss, grad, X, a, x[0, :d * k].reshape(d, k), x[0, d * k:], 0)
        return penalised(loss, grad, x, lam, np.array([n], float), penalty)

    return minimize(evaluate, x0, rtol=rtol, max_iter=max_iter, free=free)


def multinomial_start(counts: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(x₀, free) of F multinomial fits with action counts (F, k): W = 0, b_a = log of the action's share; an
    action without rows in a fit is held at w = 0, b = log(½ / (n + k/2)) (its smoothed share, as
    :func:`smoothed_rate`), since its maximum-likelihood logit is −∞; and the last logged action's intercept stays
    at its start (the softmax's one redundant direction)."""
    F, k = counts.shape
    n = counts.sum(axis=1, keepdims=True)
    share = np.where(counts > 0, counts, 0.5) / np.maximum(n + 0.5 * (counts == 0).sum(axis=1, keepdims=True), 1.0)
    x0 = np.zeros((F, (d + 1) * k))
    x0[:, d * k:] = np.log(share)
    free = np.ones((F, d + 1, k), bool)
    free[:, :, :] = (counts > 0)[:, None, :]
    present = counts > 0  # softmax is unchanged by adding one constant to every b_a: the last logged action's
    last = k - 1 - np.argmax(present[:, ::-1], axis=1)  # intercept stays at its start, which makes L strictly convex
    free[np.arange(F), d, last] = False
    return x0, free.reshape(F, -1)
