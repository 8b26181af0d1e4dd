"""The paper's classification experiments (Sec. 5.1, Appendices A–B).

Flow: :mod:`.datasets` (full-information data, verified by sha256) →
:mod:`.bandit` (uniform logging reveals one loss) → the ridge loss model
(:mod:`.loss_models`) and the library's learners (:mod:`dr_scale.learning`: IPS/DR
imputation, DLM, Filter Tree, Offset Tree, on rewards r = −l) → experiments (:mod:`.evaluation_experiment` for
Table 2, :mod:`.optimization_experiment` for Table 3) → :mod:`.reports`;
:mod:`.job` runs them from ``dr-scale run pipelines/classification_*.toml``.
"""
