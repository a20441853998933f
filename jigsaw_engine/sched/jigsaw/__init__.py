"""The Jigsaw scheduler: pipelines' sub-stages fitted into each other's gaps (see :mod:`.scheduler`)."""

from jigsaw_engine.sched.jigsaw.scheduler import JIGSAW_GRAPH, JigsawOptions, JigsawScheduler, Turns, jigsaw_resources

__all__ = ["JIGSAW_GRAPH", "JigsawOptions", "JigsawScheduler", "Turns", "jigsaw_resources"]
