"""Input and output plumbing: storage and credentials (:mod:`.storage`), atomic writes (:mod:`.atomic`), the
cache folder (:mod:`.cache`), strict JSON (:mod:`.strict_json`), typed configuration files and option validators
(:mod:`.config`, :mod:`.tomlcompat`) and ``.npz`` parameter files (:mod:`.parameter_files`)."""
