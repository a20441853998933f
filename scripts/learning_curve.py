"""GRPO on arithmetic with a tiny model on this CPU, as the product trains it: the reward curve.

    .venv/bin/python scripts/learning_curve.py --steps 150 [--batch 32]

The job is the ``math-grpo`` preset that the dashboard offers in real mode (tiny Qwen2, 1M
parameters, 8 replies per prompt; ``--checkpoint DIR`` trains a Hugging Face checkpoint instead,
on vLLM where it is installed), built by the same code as ``jigsaw run`` and the service
(:func:`~jigsaw_engine.real.jobs.build_real_pipeline`): the same warm-up, learning
rate, KL loss, four optimizer steps per update. Only the prompts per step (``--batch``) and the
step count are set here. Every 10 steps it prints the mean exact-match reward of the last 10
steps and the wall time since RL began (the warm-up is timed apart).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch

from jigsaw_engine.real.jobs import build_real_pipeline
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.sched.registry import graph_config_for
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.spec.presets import REAL_PRESETS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=None, help="prompts per step (default: the preset's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (this machine's cores)")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="train this Hugging Face checkpoint (a directory) instead of the tiny preset, e.g. the one "
        "scripts/make_example_checkpoint.py writes to var/models/tiny-qwen3-arith",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    (preset,) = [p for p in REAL_PRESETS if p.name == "math-grpo"]
    raw = copy.deepcopy(dict(preset.spec))
    if args.checkpoint is not None:
        raw["model"] = {"path": str(args.checkpoint.resolve())}
    raw["seed"] = args.seed
    raw["trainer"] = {**raw["trainer"], "total_steps": args.steps}
    if args.batch is not None:
        raw["data"] = {**raw["data"], "train_batch_size": args.batch}
    spec = parse_pipeline_spec(raw)
    started = time.perf_counter()
    pipeline = build_real_pipeline(spec, train_parts=graph_config_for("jigsaw").train_minibatches)
    print(f"{spec.train_batch_size} prompts x {spec.rollout.n} replies per step", flush=True)
    print(f"warm-up done in {time.perf_counter() - started:.1f} s", flush=True)
    scores: list[float] = []
    started = time.perf_counter()
    print(f"{'step':>5s} {'reward (last 10)':>17s} {'entropy':>8s} {'RL wall s':>10s}")
    for step in range(1, args.steps + 1):
        metrics = pipeline.run_step()
        scores.append(metrics[names.SCORE_MEAN])
        if step % 10 == 0 or step == 1:
            recent = sum(scores[-10:]) / len(scores[-10:])
            wall_s = time.perf_counter() - started
            print(f"{step:5d} {recent:17.3f} {metrics[names.ENTROPY]:8.3f} {wall_s:10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
