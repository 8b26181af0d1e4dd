"""Target policies for the Open Bandit Dataset sample's tests (80 items), importable by name."""

import numpy as np


def uniform_80(X, row_id):
    """π(a|x) = 1/80 for each of the sample's 80 items: obp's uniform ``action_dist``."""
    return np.full((row_id.shape[0], 80), 1 / 80)
