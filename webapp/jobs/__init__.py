"""Jobs: the life of one tenant's RL pipeline, from submission to its last metric."""
