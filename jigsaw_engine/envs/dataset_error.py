"""The one error a bad dataset file raises, so a user fixes every bad line in one go.

Kept apart from :mod:`jigsaw_engine.errors` because only the environments raise it; it still
derives from :class:`JigsawError`, so the API renders its ``code`` like any other.
"""

from __future__ import annotations

from collections.abc import Sequence

from jigsaw_engine.errors import JigsawError


class DatasetError(JigsawError):
    """A dataset file that cannot be used; ``problems`` holds one ``path:line: what`` entry per bad line."""

    code = "dataset_error"

    def __init__(self, path: str, problems: Sequence[str], *, hint: str = "", omitted: int = 0) -> None:
        self.path = path
        self.problems = list(problems)
        self.omitted = omitted
        """Bad lines found beyond those listed in ``problems``."""
        self.hint = hint
        parts = list(self.problems) or [f"{path}: unusable dataset"]
        if omitted:
            parts.append(f"and {omitted} more bad line{'s' if omitted != 1 else ''}")
        if hint:
            parts.append(hint)
        super().__init__("; ".join(parts))
