"""Synthetic data with known truth: the generated bandit world (:mod:`.bandit`, :mod:`.truth`,
:mod:`.finite_world`), the covariate-shift "user visits" set (:mod:`.visits`) and the small example log
bundled with the package (:mod:`.example`, ``data/example``)."""
