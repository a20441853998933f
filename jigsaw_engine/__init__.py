"""JigsawRL engine: plans and runs many RL post-training pipelines on one shared cluster.

Pure Python on the planning side (spec -> graph -> cost -> sched -> control -> sim/runtime).
Outside the engine, only ``webapp/engine_gateway.py`` imports it, and only through
:mod:`jigsaw_engine.api` and :mod:`jigsaw_engine.contracts`.
"""

__version__ = "0.1.0"
