"""The dynamic split (``JigsawOptions.colocate``, off by default): a memory-bound tail decode
holds only ``tail_share`` of its devices, and a compute-bound sub-stage of another chain takes
the rest, elastically, growing back to the whole device when the tail ends.

Only where both fit in device memory, and with the look-ahead only where the interference
table says the chain gains more device-seconds than the tails' owners lose (a late tail holds
back its owner's whole training). Without the split a device runs one chain at a time.
"""

from __future__ import annotations

from collections.abc import Callable

from jigsaw_engine.cost.interference import InterferenceTable
from jigsaw_engine.graph.substage import ResourceClass, SubStage
from jigsaw_engine.sched.jigsaw.common import EPS, JigsawOptions, is_tail, ready_chain_s
from jigsaw_engine.sched.jigsaw.homes import Homes
from jigsaw_engine.sched.protocol import ClusterView, ReadyStage
from jigsaw_engine.tasks import Task

Lendable = Callable[[ClusterView, str | None, float, int], bool]
"""(view, owner, chain seconds, device): will ``owner`` not want ``device`` back before a chain
of that length ends?"""


class DynamicSplit:
    """The interference table the split is judged by, and the rules of sharing a device."""

    def __init__(self, options: JigsawOptions, capacity: float, interference: InterferenceTable, homes: Homes) -> None:
        self.options = options
        self._capacity = capacity
        self._interference = interference
        self._homes = homes

    def may_share(self, node: SubStage) -> bool:
        """Whether ``node`` may ever run on a device in use; if not, :meth:`fits_beside` is
        true exactly of the free devices."""
        return self.options.colocate and not is_tail(node)

    def fits_beside(
        self,
        pid: str,
        node: SubStage,
        device: int,
        load: dict[int, float],
        on_device: dict[int, list[Task]],
        continuing: bool = False,
    ) -> bool:
        """Can ``node`` run on ``device`` now: free, or (dynamic split) beside one tail decode
        with room in memory for both. New co-location is for training chains (the canonical
        complement of a tail); a chain already sharing its devices may go on sharing them."""
        used = load.get(device, 0.0)
        if used < EPS:
            return True
        if not self.options.colocate or is_tail(node):
            return False
        others = on_device.get(device, [])
        if node.worker is not None and not continuing:
            # Continuous generation (async pipelines): a worker's next step starts beside its tail.
            if not (len(others) == 1 and others[0].pipeline_id == pid and others[0].node.step == node.step - 1):
                return False
        elif self.options.rollout_only or (not continuing and node.resource is not ResourceClass.COMPUTE):
            return False
        return (
            len(others) == 1
            and is_tail(others[0].node)
            and abs(used - self.options.tail_share) < EPS
            and others[0].node.mem_bytes + node.mem_bytes <= self._capacity
        )

    def fit(
        self,
        view: ClusterView,
        stage: ReadyStage,
        devices: tuple[int, ...],
        load: dict[int, float],
        on_device: dict[int, list[Task]],
        continuing: bool,
    ) -> tuple[float, bool] | None:
        """(share, elastic) on ``devices``, or None if they cannot take ``node`` now.
        ``continuing``: the chain was placed on ``devices`` already."""
        node = stage.node
        if any(not self.fits_beside(stage.pipeline_id, node, d, load, on_device, continuing) for d in devices):
            return None
        if is_tail(node) and self.options.colocate:
            return self.options.tail_share, False  # leaves room for a compute co-runner
        busy = sum(1 for d in devices if load.get(d, 0.0) > EPS)
        if busy == 0:
            return 1.0, False
        if not continuing:  # a chain already sharing its devices goes on sharing them
            if busy < len(devices):
                return None  # a gang runs at its slowest device's pace: all beside tails, or wait for all free
            if self.options.lookahead and not self._pays(view, stage, devices, on_device):
                return None
        return 1.0 - self.options.tail_share, True  # beside tails; the whole device once they end

    def _slowdowns(self) -> tuple[float, float]:
        """(compute beside a tail, tail beside compute) at the split, from the interference table."""
        tail, rest = self.options.tail_share, 1.0 - self.options.tail_share
        table = self._interference
        return table.slowdown("compute", rest, "memory", tail), table.slowdown("memory", tail, "compute", rest)

    def _owners_loss_ds(self, view: ClusterView, owners: set[str], shared_s: float) -> float | None:
        """Device-seconds the tails' owners lose while their tails run slower for ``shared_s``:
        a tail is the last thing before its owner's training, so a late tail holds back every
        device of the owner's home. None when an owner's rollout end cannot be predicted."""
        if any(o not in view.rollout_done_s for o in owners):
            return None
        _, slow_m = self._slowdowns()
        return sum(shared_s * (1.0 - 1.0 / slow_m) * len(self._homes.home.get(o, ())) for o in owners)

    def _pays(
        self, view: ClusterView, stage: ReadyStage, devices: tuple[int, ...], on_device: dict[int, list[Task]]
    ) -> bool:
        """Roll both sides forward on predicted durations: the chain started beside the tails
        now against started when they end. Worth it if the device-seconds the chain gains
        exceed those its tails' owners lose."""
        owners = {t.pipeline_id for d in devices for t in on_device.get(d, [])}
        if any(o not in view.rollout_done_s for o in owners):
            return False
        tail_left = max(view.rollout_done_s[o] for o in owners) - view.now_s
        slow_c, slow_m = self._slowdowns()
        chain = stage.chain_s
        shared_s = min(chain * slow_c, tail_left * slow_m)
        finish_co = shared_s + max(0.0, chain - shared_s / slow_c)
        gain_ds = ((tail_left + chain) - finish_co) * len(devices)
        loss_ds = self._owners_loss_ds(view, owners, shared_s)
        return loss_ds is not None and gain_ds > loss_ds

    def tail_devices(
        self,
        view: ClusterView,
        task: Task,
        width: int,
        room: int,
        load: dict[int, float],
        owner: dict[int, str],
        on_device: dict[int, list[Task]],
        lendable: Lendable,
    ) -> list[int]:
        """Up to ``room`` devices running another chain's tail that a training chain widened
        to ``width`` may share: the whole gang then runs at the shared devices' pace, so the
        look-ahead takes them only when the extra devices more than make up for it."""
        if not self.options.colocate or self.options.rollout_only or room <= 0:
            return []
        node = task.node
        candidates = [
            d
            for d in range(view.num_devices)
            if d not in task.devices
            and abs(load.get(d, 0.0) - self.options.tail_share) < EPS
            and len(on := on_device.get(d, [])) == 1
            and is_tail(on[0].node)
            and on[0].node.mem_bytes + node.mem_bytes * node.devices / (width + room) <= self._capacity
        ][:room]
        if not self.options.lookahead or not candidates:
            return candidates
        # Roll forward: the chain on `width` devices at full speed, or on width + k at the shared pace.
        slow_c, slow_m = self._slowdowns()
        chain_s = ready_chain_s(view, task)
        k = len(candidates)
        alone_s, shared_s = chain_s * node.devices / width, chain_s * node.devices * slow_c / (width + k)
        if not all(lendable(view, owner.get(d), shared_s, d) for d in candidates):
            return []  # the chain would still hold a device when its owner's training wants it
        owners = {t.pipeline_id for d in candidates for t in on_device.get(d, [])}
        tails_left = max(view.rollout_done_s.get(o, 0.0) for o in owners) - view.now_s
        loss_ds = self._owners_loss_ds(view, owners, min(shared_s, tails_left * slow_m))
        if loss_ds is None or (alone_s - shared_s) * (width + k) <= loss_ds:
            return []
        return candidates
