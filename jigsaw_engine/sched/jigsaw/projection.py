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
while a device still shortens it. Every pipeline keeps a floor (:func:`fair_floor`). Where
priorities differ, devices then move so that a higher priority is projected a lower latency
ratio than every lower one (:func:`priority_ordered`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

PRIORITY_MARGIN = 0.1
"""A higher priority is held ahead of every lower one's projected latency ratio by this fraction
(its measured ratio varies by about as much from step to step)."""


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
    asked: int = 0
    """Devices it asked for (its latency ratio's reference); 0: its ``width``."""

    def ratio(self, width: int) -> float:
        """Projected step time on ``width`` devices over that on what it asked for."""
        assert self.profile is not None
        return self.profile.step_s(width) / self.profile.step_s(self.asked or self.width)

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


def priority_ordered(demands: Mapping[str, Demand], widths: Mapping[str, int], num_devices: int) -> dict[str, int]:
    """``widths`` moved so that, whenever priorities differ, a pipeline of higher priority is
    projected a strictly lower latency ratio (:meth:`Demand.ratio`) than every one of lower
    priority. The widths that bring in the latest completion serve the time the last pipeline
    ends, which a short pipeline never decides; so a higher priority is first to take ``tp``
    devices, from those left over and then from the lower priority of lowest projected ratio
    (never below its floor), while it is not yet ahead and the devices still shorten its step;
    where no width within its reach would put it ahead, it takes nothing (the devices would only
    slow the others). Equal priorities leave ``widths`` as they are."""
    out = dict(widths)
    ranked = sorted((p for p, d in demands.items() if d.profile is not None), key=lambda p: -demands[p].priority)
    if len({demands[p].priority for p in ranked}) < 2:
        return out
    for high in ranked:
        d = demands[high]
        assert d.profile is not None
        lower = [p for p in ranked if demands[p].priority < d.priority]
        if not lower:
            continue
        # Where no width within reach would put it ahead, devices taken would only slow the others.
        floors = {p: demands[p].floor for p in lower}
        most = num_devices - sum(out.values()) + out[high] + sum(out[p] - floors[p] for p in lower)
        if not _ahead(demands, high, lower, most // d.tp * d.tp, floors, num_devices):
            continue
        while not _ahead(demands, high, lower, out[high], out, num_devices):
            if d.profile.step_s(out[high] + d.tp) >= d.profile.step_s(out[high]):
                break  # more devices would not shorten its step
            donors = [p for p in lower if out[p] - demands[p].tp >= demands[p].floor]
            left = num_devices - sum(out.values())
            if left + sum(out[p] - demands[p].floor for p in donors) < d.tp:
                break
            while left < d.tp and donors:  # the lower priority of lowest projected ratio gives first
                donor = min(donors, key=lambda p: (demands[p].ratio(out[p]), p))
                out[donor] -= demands[donor].tp
                left += demands[donor].tp
                donors = [p for p in donors if out[p] - demands[p].tp >= demands[p].floor]
            if left < d.tp:
                break
            out[high] += d.tp
    return out


def _ahead(
    demands: Mapping[str, Demand], high: str, lower: list[str], width: int, widths: Mapping[str, int], num_devices: int
) -> bool:
    """Is ``high`` on ``width`` devices projected a latency ratio below every one of ``lower``'s
    on ``widths`` (as far as they reach, :func:`_reach`), by ``PRIORITY_MARGIN``?"""
    d = demands[high]
    assert d.profile is not None
    until_s = d.steps_left * d.profile.step_s(width)
    reach = min(_reach(demands[p], widths[p], until_s, num_devices) for p in lower)
    return d.ratio(width) < (1 - PRIORITY_MARGIN) * reach


def _reach(d: Demand, width: int, until_s: float, num_devices: int) -> float:
    """The lowest latency ratio ``d`` is projected to reach: on ``width`` devices, or, when it
    outlasts ``until_s`` (the higher priority's projected end), on all the devices it may take
    over then (the cluster's)."""
    assert d.profile is not None
    if d.steps_left * d.profile.step_s(width) <= until_s:
        return d.ratio(width)
    return d.ratio(max(width, num_devices // d.tp * d.tp))


def turns_step_s(rollout_s: float, training_s: float, count: int, at_once: int) -> float:
    """Step period of ``count`` like pipelines taking turns to train, ``at_once`` at a time:
    the longer of one pipeline's chain (its rollout, then its training) and the turns the
    trainings take (``ceil(count / at_once)`` of them)."""
    return max(rollout_s + training_s, math.ceil(count / at_once) * training_s)


def turns_devices(count: int, at_once: int, rollout_width: int, training_width: int) -> int:
    """Devices ``count`` pipelines taking turns hold at once at most: ``at_once`` training on
    ``training_width`` each while the others roll out on ``rollout_width``, or all rolling out."""
    return max(at_once * training_width + (count - at_once) * rollout_width, count * rollout_width)
