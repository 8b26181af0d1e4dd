"""The out-of-core engine: where Dask runs, passes over persisted parts and the iterative solvers on them,
shared by the product and the experiments.

* :mod:`~dr_scale.outofcore.compute` — Dask's local scheduler, a ``LocalCluster`` or a scheduler address
  (one code path); :mod:`~dr_scale.outofcore.progress` — progress bars and stage lines;

* :mod:`~dr_scale.outofcore.mergeable` — the contract of mergeable states and their one tree reduction;
* :mod:`~dr_scale.outofcore.passes` — a :class:`~dr_scale.outofcore.passes.PartSet` of
  persisted (or spilled) per-part objects and the summing passes over them;
* :mod:`~dr_scale.outofcore.products` — sparse products that add into running sums;
* :mod:`~dr_scale.outofcore.ridge` — ridge regression with an unpenalized intercept for
  many fits at once, by Jacobi-preconditioned block conjugate gradients (one pass per
  iteration for all fits);
* :mod:`~dr_scale.outofcore.lanczos` — the leading eigenpair of a symmetric operator
  (one pass per matrix-vector product).
"""
