"""The logging policy π₀(a | x) estimated from a log that never recorded its propensities:
the multinomial logistic model (model), its out-of-core cross-fitted fit (fitting) and its
diagnostics — calibration, baselines, support (diagnostics)."""
