"""Reward models ρ̂: the model protocol and the linear model (:mod:`.models`), the out-of-core cross-fitted
per-action ridge fitter (:mod:`.fitting`, with its grouped layout :mod:`.grouped`), and flexible models from
scikit-learn (:mod:`.sklearn_models`) and dask-ml (:mod:`.daskml_models`)."""
