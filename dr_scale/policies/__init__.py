"""Target policies π (:mod:`.target`): constant, column, callable, linear and softmax policies, and the
``--policy`` specs that name them."""
