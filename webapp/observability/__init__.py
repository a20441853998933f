"""What the operators see of the control plane: Prometheus metrics (``/metrics``)."""
