"""Reward models ρ̂: the model protocol and the linear models (:mod:`.models`), the per-action ridge and logistic
objectives of the cross-fitting engine and their fitter (:mod:`.fitting`), a fit's printed figures
(:mod:`.summary`), the model shared across actions (:mod:`.shared`), every kind of reward model file loaded by its
kind (:mod:`.files`), and flexible models from scikit-learn (:mod:`.sklearn_models`) and dask-ml
(:mod:`.daskml_models`)."""
