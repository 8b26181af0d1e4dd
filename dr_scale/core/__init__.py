"""Foundations every layer uses: the error types (:mod:`.errors`) and keyed randomness (:mod:`.keyed_random`)."""
