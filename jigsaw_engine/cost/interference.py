"""How much two sub-stages sharing a device slow each other: a table kept as data.

``profiles/interference.json`` lists, for every pair of resource classes and every split of
the device's compute, the slowdown of each side against running alone with the whole device
(plus single-class rows for a sub-stage alone on part of a device). A measured table replaces
the modelled one without code changes; the runtime only ever looks values up.

The shipped table is modelled (``docs/cost-model.md``, "Interference"): each side gets its share
of the SMs, and HBM bandwidth is shared in proportion to demand. :func:`modelled_slowdowns` is
that model; ``scripts/model_interference.py`` writes the table from it, with
:data:`MODELLED_DESCRIPTION`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("profiles") / "interference.json"
SPLITS = (0.3, 0.5, 0.7, 1.0)
"""Shares of a device's compute a sub-stage may be given (the discrete split set)."""

# What a sub-stage of each class needs of a whole device to run at full speed: a fraction of
# the SMs and a fraction of HBM bandwidth. Training and prefill saturate the SMs and use about
# a third of the bandwidth; memory-bound decode saturates bandwidth with about a third of the SMs.
SM_NEED = {"compute": 1.0, "memory": 0.3}
BW_NEED = {"compute": 0.3, "memory": 0.9}
CO_RUN_OVERHEAD = 1.05
"""Extra slowdown of any co-run: shared L2 and warp scheduling beyond SMs and bandwidth."""
MODELLED_DESCRIPTION = (
    "Modelled, not measured (docs/cost-model.md, Interference): each side runs at min(1, SM share / SM need) "
    f"and HBM bandwidth is shared in proportion to demand; SM need {SM_NEED}, bandwidth need {BW_NEED}, "
    f"x{CO_RUN_OVERHEAD} for any co-run. Slowdowns are against the sub-stage alone on the whole device."
)
"""The ``description`` of the modelled table as ``scripts/model_interference.py`` writes it."""


def modelled_slowdowns(a: str, share_a: float, b: str | None, share_b: float) -> tuple[float, float]:
    """Slowdowns of ``a`` (and ``b``; 1.0 when absent) from SM shares and bandwidth by demand."""
    sides = [(a, share_a)] + ([(b, share_b)] if b is not None else [])
    caps = [min(1.0, share / SM_NEED[cls]) for cls, share in sides]
    demand = sum(BW_NEED[cls] * cap for (cls, _), cap in zip(sides, caps, strict=True))
    rates = [cap / max(1.0, demand) for cap in caps]
    overhead = CO_RUN_OVERHEAD if b is not None else 1.0
    slow = [overhead / r for r in rates]
    return (slow[0], slow[1] if b is not None else 1.0)


@dataclass(frozen=True, slots=True)
class InterferenceTable:
    description: str
    rows: dict[tuple[str, float, str | None, float], tuple[float, float]]

    def slowdown(self, cls: str, share: float, other: str | None = None, other_share: float = 0.0) -> float:
        """Slowdown of a ``cls`` sub-stage given ``share`` of a device, beside ``other`` (or alone)."""
        key = (cls, _snap(share), other, _snap(other_share) if other is not None else 0.0)
        if key in self.rows:
            return self.rows[key][0]
        if other is not None and (flipped := (other, key[3], cls, key[1])) in self.rows:
            return self.rows[flipped][1]
        raise KeyError(f"no interference entry for {cls} at {share} beside {other} at {other_share}")


def _snap(share: float) -> float:
    for s in SPLITS:
        if abs(share - s) < 1e-6:
            return s
    raise KeyError(f"share {share} is not one of the splits {SPLITS}")


def table_rows() -> list[dict[str, object]]:
    """The modelled table, row by row, as written to ``interference.json``."""
    classes = ("compute", "memory")
    rows: list[dict[str, object]] = []
    for a in classes:
        for s in SPLITS:
            alone = round(modelled_slowdowns(a, s, None, 0.0)[0], 4)
            rows.append({"a": a, "share_a": s, "b": None, "share_b": 0.0, "slowdown_a": alone, "slowdown_b": 1.0})
    for i, a in enumerate(classes):
        for b in classes[i:]:
            for s in SPLITS[:-1]:
                sa, sb = modelled_slowdowns(a, s, b, round(1.0 - s, 4))
                rows.append({"a": a, "share_a": s, "b": b, "share_b": round(1.0 - s, 4),
                             "slowdown_a": round(sa, 4), "slowdown_b": round(sb, 4)})  # fmt: skip
    return rows


@cache
def load_interference_table(path: Path = TABLE_PATH) -> InterferenceTable:
    raw = json.loads(path.read_text())
    rows = {
        (r["a"], _snap(r["share_a"]), r["b"], _snap(r["share_b"]) if r["b"] is not None else 0.0): (
            float(r["slowdown_a"]),
            float(r["slowdown_b"]),
        )
        for r in raw["rows"]
    }
    return InterferenceTable(raw["description"], rows)
