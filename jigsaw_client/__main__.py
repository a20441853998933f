"""``python -m jigsaw_client list``: the same as ``jigsaw jobs list``."""

import sys

from jigsaw_client.cli import main

sys.exit(main())
