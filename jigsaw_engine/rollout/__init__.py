"""Rollout engines behind one interface: requests added, aborted, exported and re-imported.

:class:`~jigsaw_engine.rollout.protocol.RolloutEngine` is the seam; the torch engine here runs
anywhere torch does, and vLLM (CPU or GPU build) implements the same protocol.
"""
