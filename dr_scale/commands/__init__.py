"""Sub-commands of the ``dr-scale`` command line."""
