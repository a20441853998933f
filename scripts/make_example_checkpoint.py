"""Write the example real-architecture checkpoint that `examples/real-checkpoint.yaml` trains.

    .venv/bin/python scripts/make_example_checkpoint.py [--out var/models/tiny-qwen3-arith]

A Qwen3 decoder of about a million parameters with its own BPE tokenizer and a ChatML chat
template, warmed up on arithmetic (:mod:`jigsaw_engine.train.example_checkpoint`), saved with
``save_pretrained``. `var/models` is where the service takes checkpoints from by default
(``ENGINE_MODEL_ROOTS``). A second run with the same recipe keeps the folder as it is.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from jigsaw_engine.train.example_checkpoint import build_example_checkpoint

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "var" / "models" / "tiny-qwen3-arith"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the checkpoint's folder")
    args = parser.parse_args()
    started = time.perf_counter()
    folder = build_example_checkpoint(args.out.resolve())
    files = ", ".join(sorted(p.name for p in folder.iterdir()))
    print(f"{folder} ({time.perf_counter() - started:.1f} s): {files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
