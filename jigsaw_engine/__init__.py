"""JigsawRL engine: plans and runs many RL post-training pipelines on one shared cluster.

Pure Python on the planning side (spec -> cost -> workload -> graph -> tasks -> sched | sim ->
control); the real-RL stack sits beside it, and the real side, the hosts, the API and the CLI
build on both (the layers: ``docs/architecture.md``, enforced by import-linter).
Outside the engine, only ``webapp/engine_gateway.py`` imports it, and only through
:mod:`jigsaw_engine.api` and :mod:`jigsaw_engine.contracts`.
"""

__version__ = "0.1.0"
