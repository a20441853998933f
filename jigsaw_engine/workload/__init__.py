"""The workload model: what a step's rollouts look like (sampled, or replayed from real traces)
and how a rollout worker decodes them; the graph is built from it."""
