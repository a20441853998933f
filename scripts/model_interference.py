"""Write the modelled interference table (``jigsaw_engine/cost/profiles/interference.json``).

    python scripts/model_interference.py

A measured table (same rows, measured slowdowns) replaces the file without code changes.
"""

from __future__ import annotations

import json

from jigsaw_engine.cost.interference import BW_NEED, CO_RUN_OVERHEAD, SM_NEED, TABLE_PATH, table_rows

DESCRIPTION = (
    "Modelled, not measured (BENCHMARKS.md §1): each side runs at min(1, SM share / SM need) and HBM "
    f"bandwidth is shared in proportion to demand; SM need {SM_NEED}, bandwidth need {BW_NEED}, "
    f"x{CO_RUN_OVERHEAD} for any co-run. Slowdowns are against the sub-stage alone on the whole device."
)

if __name__ == "__main__":
    TABLE_PATH.write_text(json.dumps({"description": DESCRIPTION, "rows": table_rows()}, indent=1) + "\n")
    print(f"wrote {TABLE_PATH}")
