"""Off-policy estimation: the estimators (:mod:`.estimators`, paper Sec. 2) as mergeable statistics
(:mod:`.moments`, :mod:`.mergeable`), their intervals (:mod:`.intervals`), weight diagnostics
(:mod:`.diagnostics`), input checks (:mod:`.checks`) and evaluation over logs (:mod:`.evaluation`)."""
