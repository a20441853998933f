"""RL environments and rewards: verifiable math, self-refinement, retrieval with a real tool, users' JSONL.

Everything here is plain Python (no torch), so the rollout loop can run it next to any engine.
Import the concrete modules (``envs.registry`` to build one by name); this package imports nothing
so that loading the protocol never pulls in the retriever.
"""
