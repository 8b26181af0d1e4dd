"""The cross-fitting engine between the log contract and the models: the one driver and the objectives it drives
(:mod:`.engine`: read, group and spill the parts, the sums, the one λ search, the final fit, one metadata record),
how a fit runs (:mod:`.settings`), a log's parts as the fitters hold them, grouped by (fold, action), and the keyed
folds and λ sample (:mod:`.parts`), the cross-fitted linear model and the registry of model-file kinds
(:mod:`.folded`)."""
