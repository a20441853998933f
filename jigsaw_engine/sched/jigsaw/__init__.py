"""The Jigsaw scheduler: pipelines' sub-stages fitted into each other's gaps.

Each mechanism is a module that owns its state; :class:`JigsawScheduler` composes them, and
``JigsawOptions`` switches them for the ablations (figures: ``docs/benchmarks.md``; how a job
flows through them: ``docs/architecture.md``).

- **Homes and resizing** (:mod:`.homes`, :mod:`.projection`): every pipeline has a home, the
  devices its chains start on, and a chain stays where it started because its KV cache or
  training state lives there. Homes are resized at every step so that the pipelines still
  running take over the devices of those that ended; with the look-ahead, to bring in the
  latest projected completion (a step profiled as a serial rollout plus data-parallel
  training), then so that a higher priority is projected the lower latency ratio.
- **Lending and placement** (:mod:`.placement`): a rollout chain that finds no free device at
  home runs on another home's idle devices, and a training chain widens onto devices left
  idle, so that no device waits while its owner does not need it. With the look-ahead a loan
  is made only if the chain, rolled forward on predicted durations, ends before the owner
  wants the device back; without it (``greedy``) every idle device is lent.
- **Taking turns** (:mod:`.turns`): alike synchronous pipelines each roll out on one worker and
  take turns to train on a wide group, when the look-ahead projects a shorter step: a
  long-tailed rollout barely shortens with more workers while training is data parallel. Each
  round of turns goes in priority order.
- **The dynamic split** (:mod:`.split`, off by default): a memory-bound tail decode keeps part
  of its devices and a compute-bound sub-stage of another chain takes the rest, where both fit
  in memory and, with the look-ahead, the interference table says the chain gains more than
  the tail's owner loses.
- **The decide loop** (:mod:`.scheduler`): chains already placed continue first, then new
  training chains (they unblock a pipeline's next step), then new rollout workers, pipelines
  ranked by projected remaining time weighted by priority. A device moving from one pipeline
  to another pays a warm context switch from host memory.
"""

from jigsaw_engine.sched.jigsaw.common import JIGSAW_GRAPH, JigsawOptions
from jigsaw_engine.sched.jigsaw.homes import jigsaw_resources
from jigsaw_engine.sched.jigsaw.scheduler import JigsawScheduler
from jigsaw_engine.sched.jigsaw.turns import Turns

__all__ = ["JIGSAW_GRAPH", "JigsawOptions", "JigsawScheduler", "Turns", "jigsaw_resources"]
