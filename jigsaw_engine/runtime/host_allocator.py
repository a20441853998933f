"""Keep freed memory in a process whose threads do the work, so it is not faulted in again.

glibc's malloc gives each thread that allocates an arena of its own. Those arenas hand
freed memory back to the kernel as soon as a little of it is free at the top, and by default
any allocation above 128 KiB is a fresh mapping. A pipeline actor runs its work on threads
(one lane per kind of work), so without these settings every step faults its buffers in again
and spends a large share of its time in the kernel (figures in ``docs/real-runs.md``). Two
settings fix it: :func:`keep_freed_memory`, called by the process, and :data:`ONE_ARENA_ENV`,
which must be in its environment when it starts (glibc reads it once).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""``mallopt`` parameters (``malloc.h``)."""
ONE_ARENA_ENV = {"MALLOC_ARENA_MAX": "1"}
"""A process's threads share the main heap: the other arenas are heaps of 64 MiB, which an
update's buffers outgrow and which glibc unmaps whole once they are free, so an update would
fault them in again. Given to the actor's worker process as a Ray runtime env."""
TRIM_THRESHOLD_BYTES = 256 * 2**20
"""Free memory at the top of a heap kept before any is given back: more than a tiny job's
step frees at once."""
MMAP_THRESHOLD_BYTES = 32 * 2**20
"""Allocations at least this large get a mapping of their own, given back when freed (glibc's
upper limit for this parameter): a large model's CPU copies are not held."""


def keep_freed_memory() -> bool:
    """Set the calling process's malloc to keep freed memory (:data:`TRIM_THRESHOLD_BYTES`,
    :data:`MMAP_THRESHOLD_BYTES`). True where it took effect; False where the C library is
    not glibc (nothing changes there)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        logger.debug("no mallopt in %s: freed memory is handled as the C library does", name)
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)) and bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    )
