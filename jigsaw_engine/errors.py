"""Engine errors. Each carries a stable ``code`` that the API renders unchanged."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field of a user's spec.

    ``field`` is a dotted path with list indices (``pipelines[2].rollout.n``); ``message``
    says what is wrong and, where there is one, the fix.
    """

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class JigsawError(Exception):
    """Base class of every error the engine raises on purpose."""

    code = "engine_error"


class SpecError(JigsawError):
    """A spec that cannot be run as written; lists every field-level problem found."""

    code = "validation_error"

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid spec")


class PolicyError(JigsawError):
    """A benchmark policy that cannot lay out the workload it is given."""

    code = "policy_not_applicable"


class UnknownPipelineError(JigsawError):
    code = "unknown_pipeline"


class DuplicatePipelineError(JigsawError):
    code = "duplicate_pipeline"


class WorkerLostError(JigsawError):
    """A real pipeline's worker process died under a sub-stage (killed, out of memory, its
    node gone). Nothing is wrong with the job: it can resume from its latest checkpoint."""

    code = "worker_lost"
