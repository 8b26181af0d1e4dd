"""The cross-fitting engine between the log contract and the models: how a fit runs (:mod:`.settings`), a log's
parts as the fitters hold them, grouped by (fold, action), and the keyed folds and λ sample (:mod:`.parts`), the
cross-fitted linear model and its files (:mod:`.folded`)."""
