"""Off-policy estimation: the estimators (:mod:`.estimators`, paper Sec. 2) as mergeable statistics
(:mod:`.moments`; their contract and reduction: :mod:`dr_scale.outofcore.mergeable`), their intervals
(:mod:`.intervals`), weight diagnostics (:mod:`.diagnostics`), input checks (:mod:`.checks`) and evaluation over
logs (:mod:`.evaluation`)."""
