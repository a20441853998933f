"""Processes a test started, found by ancestry rather than by name across the machine: the
fault suite runs beside the rest of the tests, with Ray actors of the same names in its own
Ray cluster, and neither may count or kill the other's."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(root: int) -> list[int]:
    """Every process below ``root``, its children's children included."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def ray_actor_processes(actor: str, *, root: int | None = None) -> set[int]:
    """The ``ray::<actor>`` processes below ``root`` (this process: the Ray cluster a test
    session starts with ``ray.init`` runs its workers below it)."""
    below = descendants(os.getpid() if root is None else root)
    return {pid for pid in below if _title(pid).startswith(f"ray::{actor}")}


def _title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # gone meanwhile
        return ""
