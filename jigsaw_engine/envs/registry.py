"""Build an environment by name from plain options, as a spec names it.

One place knows every environment and its options, so a typo in a spec (an unknown env, an
unknown or mistyped option) fails with the list of what would have worked. Each environment's
module is imported only when asked for, so naming ``math`` never loads the retriever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, get_args

from jigsaw_engine.envs.protocol import Environment, EnvTask

EnvName = Literal["math", "gsm8k", "self_refine", "retrieval", "jsonl"]
ENV_NAMES: tuple[EnvName, ...] = get_args(EnvName)


class _Options:
    """Typed reads of ``**options``; unknown or mistyped ones raise ValueError naming the env."""

    def __init__(self, env: str, options: Mapping[str, object], known: Sequence[str]) -> None:
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ValueError(
                f"unknown option(s) for env {env!r}: {', '.join(unknown)}; known options: {', '.join(known)}"
            )
        self._env = env
        self._options = options

    def _bad(self, key: str, wanted: str) -> ValueError:
        return ValueError(f"option {key!r} of env {self._env!r} must be {wanted}, got {self._options[key]!r}")

    def has(self, key: str) -> bool:
        return self._options.get(key) is not None

    def integer(self, key: str, default: int) -> int:
        value = self._options.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._bad(key, "an integer")
        return value

    def number(self, key: str, default: float) -> float:
        value = self._options.get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self._bad(key, "a number")
        return float(value)

    def text(self, key: str, default: str | None = None) -> str:
        value = self._options.get(key, default)
        if value is None:
            raise ValueError(f"env {self._env!r} needs option {key!r}")
        if not isinstance(value, str):
            raise self._bad(key, "a string")
        return value

    def path(self, key: str, default: Path | None = None) -> Path:
        value = self._options.get(key, default)
        if value is None:
            raise ValueError(f"env {self._env!r} needs option {key!r} (a file path)")
        if not isinstance(value, str | Path):
            raise self._bad(key, "a file path")
        return Path(value)

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self._options.get(key, default)
        if isinstance(value, str):
            return tuple(value)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, "a list of strings")
        return tuple(str(v) for v in value)


_ARITH_OPTIONS = ("seed", "count", "max_operand", "ops")


def _make_math(options: Mapping[str, object]) -> Environment:
    from jigsaw_engine.envs.math_tasks import MathEnv

    return MathEnv(_arith_tasks(_Options("math", options, _ARITH_OPTIONS)), name="math")


def _make_gsm8k(options: Mapping[str, object]) -> Environment:
    from jigsaw_engine.envs.graders import parse_grader_name
    from jigsaw_engine.envs.math_tasks import GSM8K_SAMPLE, MathEnv, load_gsm8k

    opts = _Options("gsm8k", options, ("path", "grader"))
    grader = parse_grader_name(opts.text("grader", "numeric"))
    return MathEnv(load_gsm8k(opts.path("path", GSM8K_SAMPLE), grader), grader=grader, name="gsm8k")


def _make_self_refine(options: Mapping[str, object]) -> Environment:
    from jigsaw_engine.envs.math_tasks import GSM8K_SAMPLE, load_gsm8k
    from jigsaw_engine.envs.self_refine import SelfRefineEnv

    opts = _Options("self_refine", options, (*_ARITH_OPTIONS, "dataset", "path", "max_turns", "decay"))
    dataset = opts.text("dataset", "arith")
    if dataset == "arith":
        if opts.has("path"):
            raise ValueError("option 'path' of env 'self_refine' needs dataset='gsm8k'")
        tasks = _arith_tasks(opts)
    elif dataset == "gsm8k":
        tasks = load_gsm8k(opts.path("path", GSM8K_SAMPLE))
    else:
        raise ValueError(f"option 'dataset' of env 'self_refine' must be 'arith' or 'gsm8k', got {dataset!r}")
    return SelfRefineEnv(tasks, max_turns=opts.integer("max_turns", 3), decay=opts.number("decay", 0.5))


def _make_retrieval(options: Mapping[str, object]) -> Environment:
    from jigsaw_engine.envs.retrieval import RETRIEVAL_CORPUS, RETRIEVAL_QA, make_retrieval_env

    opts = _Options("retrieval", options, ("corpus_path", "qa_path", "k", "max_turns"))
    return make_retrieval_env(
        opts.path("corpus_path", RETRIEVAL_CORPUS),
        opts.path("qa_path", RETRIEVAL_QA),
        k=opts.integer("k", 3),
        max_turns=opts.integer("max_turns", 3),
    )


def _make_jsonl(options: Mapping[str, object]) -> Environment:
    from jigsaw_engine.envs.jsonl_dataset import JsonlEnv

    opts = _Options("jsonl", options, ("path", "grader"))
    return JsonlEnv(opts.path("path"), opts.text("grader"))


def _arith_tasks(opts: _Options) -> list[EnvTask]:
    from jigsaw_engine.envs.math_tasks import generate_arithmetic

    return generate_arithmetic(
        seed=opts.integer("seed", 0),
        count=opts.integer("count", 1000),
        max_operand=opts.integer("max_operand", 9),
        ops=opts.strings("ops", ("+",)),
    )


_BUILDERS: Mapping[EnvName, Callable[[Mapping[str, object]], Environment]] = {
    "math": _make_math,
    "gsm8k": _make_gsm8k,
    "self_refine": _make_self_refine,
    "retrieval": _make_retrieval,
    "jsonl": _make_jsonl,
}


def make_env(name: str, **options: object) -> Environment:
    """The environment called ``name``, built from ``options``.

    ``math``: seed=0, count=1000, max_operand=9, ops=("+",).
    ``gsm8k``: path=<shipped sample>, grader="numeric".
    ``self_refine``: dataset="arith" (with the ``math`` options) or "gsm8k" (with path), max_turns=3, decay=0.5.
    ``retrieval``: corpus_path, qa_path (the shipped ones), k=3, max_turns=3.
    ``jsonl``: path (JSONL, or ``.parquet`` in verl's layout) and grader ("exact_match", "numeric"
    or "math"), both required.

    Raises ValueError for an unknown name or option, :class:`DatasetError` for a bad file.
    """
    for known in ENV_NAMES:
        if name == known:
            return _BUILDERS[known](options)
    raise ValueError(f"unknown env {name!r}; known envs: {', '.join(ENV_NAMES)}")
