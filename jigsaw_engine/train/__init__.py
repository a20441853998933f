"""The torch trainer: log-prob forwards, the policy update, supervised warm-up, checkpoints."""
