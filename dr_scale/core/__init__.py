"""Foundations every layer uses: the error types (:mod:`.errors`), keyed randomness (:mod:`.keyed_random`) and
numbers as people read them (:mod:`.numbers`)."""
