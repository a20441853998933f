"""``scripts/gpu_check.py`` as a GPU host runs it, on this machine's CPU: in a process where Ray,
vLLM and Django cannot be imported and the project is not installed, ``--device cpu`` writes one
JSON whose every part is ok, with the steps trained, the checkpoint resumed into identical weights
and each phase beside its forecast."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
BLOCKED = ("ray", "vllm", "django")

WRAPPER = textwrap.dedent(
    f"""
    import runpy, sys

    class Refuse:
        # What a GPU host without these packages answers to their import.
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (refused by the test)", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    # The project as a copy of the repository, not installed: the editable install's finder and
    # path hook go, so only the path the script itself adds finds it.
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and not p.startswith("__editable__")]
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)


def run_wrapped(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_the_wrapper_refuses_the_packages_and_hides_the_installed_project(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\n"
        "for name in ('ray', 'vllm', 'django', 'jigsaw_engine'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        print(name, 'imported')\n"
        "    except ImportError:\n"
        "        print(name, 'refused')\n"
    )
    done = run_wrapped([str(probe)], tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ray", "refused", "vllm", "refused", "django", "refused", "jigsaw_engine", "refused"]


@pytest.mark.slow
def test_a_cpu_run_writes_one_json_with_every_part_ok(tmp_path: Path) -> None:
    out = tmp_path / "report" / "gpu_check.json"
    started = time.perf_counter()
    done = run_wrapped([str(SCRIPT), "--device", "cpu", "--out", str(out)], tmp_path, timeout=240)
    elapsed_s = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-4000:]
    assert elapsed_s < 90  # about 20 s on an idle 2-core host; a loaded one runs 2-3x slower
    assert "[gpu_check" in done.stderr and "step 3:" in done.stderr  # progress as it runs
    assert list(tmp_path.iterdir()) == [out.parent] and list(out.parent.iterdir()) == [out]  # one file

    report = json.loads(out.read_text())
    assert report["partial"] is False and 0 < report["wall_s"] < 60
    assert {name: part["status"] for name, part in report["parts"].items()} == {
        "grpo": "ok",
        "profile_sweep": "ok",
        "forecast": "ok",
    }
    assert report["host"]["torch"] == torch.__version__ and report["host"]["device_name"]
    assert report["host"]["transformers"] and report["host"]["cuda"] == torch.version.cuda

    grpo = report["grpo"]
    assert (grpo["backend"], grpo["world_size"], grpo["dtype"]) == ("gloo", 1, "float32")
    assert grpo["fsdp"].startswith("FSDP")  # the trainer really is sharded
    assert grpo["checkpoint"]["config"]["architectures"] == ["Qwen3ForCausalLM"]
    steps = grpo["steps"]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    for step in steps:
        assert step["sequences"] == 32 * 8 and step["response_tokens"] > 0
        assert 0.0 <= step["metrics"]["critic/score/mean"] <= 1.0
        assert step["metrics"]["actor/grad_norm"] > 0.0
    assert any(s["metrics"]["critic/score/mean"] > 0 for s in steps)  # the warmed-up checkpoint earns rewards

    # Saved after two steps (of four optimizer steps each), resumed into a fresh trainer exactly.
    assert grpo["save"]["after_steps"] == 2 and grpo["save"]["seconds"] > 0
    resume = grpo["resume"]
    assert resume["step"] == 2 and resume["max_weight_diff"] == 0.0 and resume["max_moment_diff"] == 0.0
    assert resume["optimizer_steps_saved"] == resume["optimizer_steps_resumed"] == [8.0]
    assert [s["step"] for s in grpo["resumed_steps"]] == [2, 3]
    assert grpo["continuation"]["identical"]  # the same steps again: same rollouts, metrics, weights

    forecast = report["forecast"]
    assert forecast["project_profile"] == "cpu" and forecast["counted_steps"] == [1, 2, 3]
    phases = {row["phase"]: row for row in forecast["phases"]}
    assert list(phases) == [
        "rollout",
        "reward",
        "old_logprob",
        "ref_logprob",
        "update",
        "weight_sync",
        "save",
        "resume",
    ]
    for row in phases.values():
        assert row["measured_s"] > 0 and row["forecast_s"] > 0, row
        assert row["ratio"] == pytest.approx(row["measured_s"] / row["forecast_s"], rel=0.01)
        assert row["forecast_swept_s"] > 0  # the profile this run measured forecasts too
    # The torch loop's main phases on the profile fitted to it land within a few times of it.
    for name in ("rollout", "old_logprob", "update"):
        assert 0.25 < phases[name]["ratio"] < 4.0, phases[name]

    sweep = report["profile_sweep"]
    assert sweep["profile"]["name"] == "cpu-torch" and "--quick" in sweep["argv"]
    assert any(p["status"] == "measured" for p in sweep["points"]["decode"])


@pytest.mark.parametrize(
    ("flags", "messages"),
    [
        (["--device", "cpu", "--steps", "1"], ["--steps: must be at least 2"]),
        (
            ["--device", "cpu", "--steps", "4", "--save-after", "4", "--budget-s", "0"],
            ["--budget-s: must be > 0", "--save-after: must be 1..3"],
        ),
    ],
)
def test_bad_arguments_exit_2_naming_the_flag(tmp_path: Path, flags: list[str], messages: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "x.json"), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert all(message in done.stderr for message in messages), done.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a CUDA device")
def test_asking_for_cuda_without_one_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "x.json")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "--device cuda: torch sees no CUDA device here" in done.stderr


@pytest.mark.slow
def test_a_part_that_fails_is_recorded_with_its_error_and_the_run_goes_on(tmp_path: Path) -> None:
    """A budget too small for the loop: every part still reports, each with its reason, in a
    complete file, and the exit status says something failed."""
    out = tmp_path / "gpu_check.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--out", str(out), "--budget-s", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["partial"] is False
    parts = report["parts"]
    assert parts["grpo"]["status"] == "failed" and "ran out before the example checkpoint" in parts["grpo"]["error"]
    assert parts["profile_sweep"]["status"] == "failed" and "left for the sweep" in parts["profile_sweep"]["error"]
    assert parts["forecast"]["status"] == "failed" and "ran no step" in parts["forecast"]["error"]
    assert report["grpo"]["reference_s_before"] > 0  # what the loop did before it stopped is kept
    assert "grpo failed: BudgetSpent" in done.stderr
