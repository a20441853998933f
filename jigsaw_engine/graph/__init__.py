"""The sub-stage graph of a pipeline step, and its prediction from recent steps."""
