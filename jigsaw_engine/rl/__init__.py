"""RL algorithms on torch tensors: advantage estimators, KL, policy and value losses, DAPO knobs, metric names."""
