"""The paper's experiments, as applications of the library: the covariate-shift experiment
(:mod:`.visits`, Sec. 5.2) and the classification experiments (:mod:`.classification`, Sec. 5.1)."""
