"""Projected completion times and the widths that bring the latest one in (look-ahead resize).

A synchronous step is a rollout whose wall time is set by its slowest worker (its longest
sequences and tool waits: more workers barely shorten it) followed by log-probs and updates
that are data-parallel (twice the devices, half the time). So a step on ``w`` devices takes

    step_s(w) = serial_s + scalable_gpu_s / w

with both terms observed on the pipeline's last step. An asynchronous pipeline whose rollouts
may run ``lag`` steps ahead completes a step every

    step_s(w) = max((serial_s + scalable_gpu_s / w) / (lag + 1), scalable_gpu_s / w + sync_s)

(``lag + 1`` steps are in flight around the cycle rollout -> training -> weight sync -> the
rollout that needs those weights; training itself is serial). A pipeline with ``n`` steps left
is projected to finish in ``n * step_s(w)``. Throughput over a mix is tokens over the time the
last pipeline ends, so the widths are chosen to minimise the latest priority-weighted projected
completion: devices go, ``tp`` at a time, to whichever pipeline is projected to end last,
while a device still shortens it. Every pipeline keeps a floor (:func:`fair_floor`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepProfile:
    serial_s: float
    """Wall time of a step that more devices do not shorten (rollout, weight sync), seconds."""
    scalable_gpu_s: float
    """Device-seconds of a step spread over its devices (log-prob forwards, updates)."""
    lag: int = 0
    """Steps an asynchronous pipeline's rollouts may run ahead of its training (0: sync)."""
    sync_s: float = 0.0
    """The weight sync, part of ``serial_s`` (async: it bounds the step with training)."""

    def step_s(self, width: int) -> float:
        train_s = self.scalable_gpu_s / max(1, width)
        return max((self.serial_s + train_s) / (self.lag + 1), train_s + self.sync_s)


@dataclass(frozen=True, slots=True)
class Demand:
    """What the resize knows of one pipeline."""

    steps_left: float
    """Steps still to run (less the part of the current one already behind it)."""
    profile: StepProfile | None
    """None before a step was observed: the pipeline keeps ``width``."""
    width: int
    """Devices it holds now."""
    floor: int
    """Fewest devices it may be given (a multiple of ``tp``)."""
    tp: int
    priority: float = 1.0

    def remaining_s(self, width: int) -> float:
        """Projected time to finish on ``width`` devices, weighted by priority."""
        if self.profile is None:
            return 0.0
        return self.priority * self.steps_left * self.profile.step_s(width)


def fair_floor(profile: StepProfile, asked: int, tp: int, max_slowdown: float) -> int:
    """The fewest devices (a multiple of ``tp``, at least ``tp``) on which a step takes at most
    ``max_slowdown`` times what it takes on the ``asked`` devices: a pipeline gives devices to
    another only while its own step time stays within that bound."""
    limit = max_slowdown * profile.step_s(asked)
    width = tp
    while width < asked and profile.step_s(width) > limit:  # step time falls as width grows
        width += tp
    return width


def balanced_widths(demands: Mapping[str, Demand], num_devices: int) -> dict[str, int]:
    """Widths minimising the latest weighted projected completion on ``num_devices`` devices.

    Pipelines without a profile keep their width; the rest start at their floor and receive
    ``tp`` devices at a time, always to the one projected to finish last (step time is convex
    and decreasing in the width, so serving the current maximum minimises the maximum). A
    pipeline stops receiving when ``tp`` more devices would not shorten it by even a second,
    and the devices left over stay unassigned (lent out, or taken by whoever needs them)."""
    widths = {pid: d.width if d.profile is None else d.floor for pid, d in demands.items()}
    left = num_devices - sum(widths.values())
    heap = [(-d.remaining_s(widths[pid]), pid) for pid, d in demands.items() if d.profile is not None]
    heapq.heapify(heap)
    while heap and left > 0:
        neg, pid = heapq.heappop(heap)
        d = demands[pid]
        if d.tp > left:
            continue
        after = d.remaining_s(widths[pid] + d.tp)
        if -neg - after < 1.0:
            continue  # no shorter by a second: it does not need more
        widths[pid] += d.tp
        left -= d.tp
        heapq.heappush(heap, (-after, pid))
    return widths


def turns_step_s(rollout_s: float, training_s: float, count: int, at_once: int) -> float:
    """Step period of ``count`` like pipelines taking turns to train, ``at_once`` at a time:
    the longer of one pipeline's chain (its rollout, then its training) and the turns the
    trainings take (``ceil(count / at_once)`` of them)."""
    return max(rollout_s + training_s, math.ceil(count / at_once) * training_s)


def turns_devices(count: int, at_once: int, rollout_width: int, training_width: int) -> int:
    """Devices ``count`` pipelines taking turns hold at once at most: ``at_once`` training on
    ``training_width`` each while the others roll out on ``rollout_width``, or all rolling out."""
    return max(at_once * training_width + (count - at_once) * rollout_width, count * rollout_width)
