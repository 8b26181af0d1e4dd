"""The paper's classification experiments (Sec. 5.1, Appendices A–B).

Flow: :mod:`.datasets` (full-information data, verified by sha256) →
:mod:`.bandit` (uniform logging reveals one loss; IPS/DR imputation) →
learners (:mod:`.dlm`, :mod:`.filter_tree`, :mod:`.offset_tree`) and the ridge loss
model (:mod:`.loss_models`) → experiments (:mod:`.evaluation_experiment` for
Table 2, :mod:`.optimization_experiment` for Table 3) → :mod:`.reports`;
:mod:`.job` runs them from ``dr-scale run pipelines/classification_*.toml``.
"""
