"""The ``jigsaw`` console script: ``jigsaw jobs ...`` talks to a server (this package), every
other command is the engine's (``jigsaw_engine.cli``).

Both imports are lazy, so the engine's commands run where httpx is not installed (the
engine-only venv) and the client's never load the engine.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

JOBS_HINT = "\njobs: submit and watch jobs on a JigsawRL server (jigsaw jobs --help)"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["jobs"]:
        try:
            from jigsaw_client.cli import main as jobs_main
        except ModuleNotFoundError as exc:
            print(f"jigsaw jobs needs {exc.name}: pip install 'jigsawrl[client]'", file=sys.stderr)
            return 2
        return jobs_main(args[1:])
    from jigsaw_engine.cli import main as engine_main

    if args[:1] in (["-h"], ["--help"]):
        try:
            return engine_main(args)
        finally:
            print(JOBS_HINT)
    return engine_main(args)


if __name__ == "__main__":
    sys.exit(main())
