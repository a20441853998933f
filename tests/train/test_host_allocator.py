"""A worker thread's freed memory stays in the process once ``keep_freed_memory`` has run:
the next step's buffers come back without page faults (each case in a fresh interpreter,
since malloc's settings are process-wide)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHURN = """
import resource, sys, threading
from jigsaw_engine.runtime.host_allocator import keep_freed_memory

kept = keep_freed_memory() if sys.argv[1] == "keep" else None

def steps():
    # A step's buffers: 40 blocks of 1 MiB, all freed at the step's end, as a lane's are.
    faults = []
    for _ in range(4):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        blocks = [bytearray(2**20) for _ in range(40)]
        del blocks
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    print(kept, faults[-1])

worker = threading.Thread(target=steps)
worker.start()
worker.join()
"""


def churn(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True).stdout
    kept, faults = out.split()
    return kept, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc and RUSAGE_THREAD are Linux's")
def test_a_threads_freed_buffers_are_reused_without_page_faults():
    _, faults_by_default = churn("default")
    kept, faults_kept = churn("keep")
    assert kept == "True"
    # 40 MiB is 10,240 pages: by default a later step faults most of them in again.
    assert faults_by_default > 5_000
    assert faults_kept < 500
