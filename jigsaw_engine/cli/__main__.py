"""``python -m jigsaw_engine.cli``: the ``jigsaw`` command."""

import sys

from jigsaw_engine.cli import main

sys.exit(main())
