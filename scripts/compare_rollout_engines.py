"""The example checkpoint's job on vLLM and on the torch loop, side by side; and how long new
weights take to reach a vLLM worker in memory against a save to disk and a reload.

    .venv/bin/python scripts/compare_rollout_engines.py [--steps 8] [--batch 16]

Both runs build the same job (:func:`~jigsaw_engine.real.jobs.build_real_pipeline`, the code
``jigsaw run`` and the service use) from the checkpoint that ``scripts/make_example_checkpoint.py``
writes, on one core, with the same seeds: sampling is portable across engines, so the rewards
must match step for step and only the times differ. The weight-sync part times, on one vLLM
engine holding that checkpoint: ``load_weights`` from the trainer's tensors (what a real step's
``timing_s/sync`` pays), a save of the weights as safetensors and a load back into the engine,
and a save followed by a new engine started from the folder (what a system without in-memory
sync pays after every update).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from jigsaw_engine.models.loading import save_policy
from jigsaw_engine.real.jobs import RealJobOptions, build_real_pipeline
from jigsaw_engine.rl import metrics as names
from jigsaw_engine.spec.pipeline import parse_pipeline_spec
from jigsaw_engine.train.example_checkpoint import build_example_checkpoint

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("gen", "old_log_prob", "ref", "update_actor", "sync", "step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16, help="prompts per step (8 replies each)")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "var" / "models" / "tiny-qwen3-arith")
    parser.add_argument("--sync-repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = build_example_checkpoint(args.checkpoint.resolve())
    spec = parse_pipeline_spec(
        {
            "name": "ckpt-grpo",
            "model": {"path": str(folder)},
            "workload": "gsm8k",
            "data": {"train_batch_size": args.batch},
            "rollout": {"n": 8, "max_response_length": 8},
            "resources": {"num_gpus": 1},
            "trainer": {"total_steps": args.steps},
        }
    )
    runs: dict[str, list[dict[str, float]]] = {}
    for engine in ("vllm", "torch"):
        pipeline = build_real_pipeline(spec, train_parts=1, options=RealJobOptions(rollout_engine=engine))
        runs[engine] = [pipeline.run_step() for _ in range(args.steps)]
    print(f"{args.steps} steps of {args.batch} prompts x 8 replies, one core, {folder.name}")
    print("step  " + "  ".join(f"{e:>6s}" for e in runs))
    for s in range(args.steps):
        print(f"{s + 1:4d}  " + "  ".join(f"{runs[e][s][names.SCORE_MEAN]:6.3f}" for e in runs))
    print("mean seconds per step after the first (torch / vllm in the last column):")
    for phase in PHASES:
        key = names.TIMING_PREFIX + phase
        means = {e: statistics.mean(m.get(key, 0.0) for m in runs[e][1:]) for e in runs}
        ratio = means["torch"] / means["vllm"] if means["vllm"] else float("nan")
        print(f"  {phase:13s} vllm {means['vllm']:7.3f}  torch {means['torch']:7.3f}  x{ratio:5.2f}")
    _time_weight_sync(folder, args.sync_repeats)
    return 0


def _time_weight_sync(folder: Path, repeats: int) -> None:
    from safetensors.torch import load_file, save_file

    from jigsaw_engine.models.loading import load_policy
    from jigsaw_engine.rollout.vllm_engine import VllmRolloutEngine

    policy = load_policy(folder)
    engine = VllmRolloutEngine(folder)
    weights = {name: tensor.detach().clone() for name, tensor in policy.model.state_dict().items()}
    in_memory, through_file, new_engine = [], [], []
    with tempfile.TemporaryDirectory(prefix="jigsaw-sync-") as tmp:
        for _ in range(repeats):
            started = time.perf_counter()
            engine.load_weights(weights)
            in_memory.append(time.perf_counter() - started)

            started = time.perf_counter()
            save_file({k: v.contiguous() for k, v in weights.items()}, f"{tmp}/model.safetensors")
            engine.load_weights(load_file(f"{tmp}/model.safetensors"))
            through_file.append(time.perf_counter() - started)

            started = time.perf_counter()
            save_policy(policy.model, policy.tokenizer, Path(tmp) / "policy")
            VllmRolloutEngine(Path(tmp) / "policy")
            new_engine.append(time.perf_counter() - started)
    print(f"weight sync to one vLLM engine, median of {repeats}:")
    print(f"  in memory (load_weights)        {statistics.median(in_memory) * 1e3:8.1f} ms")
    print(f"  save + load the file            {statistics.median(through_file) * 1e3:8.1f} ms")
    print(f"  save + start a new engine       {statistics.median(new_engine) * 1e3:8.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
