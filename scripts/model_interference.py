"""Write the modelled interference table (``jigsaw_engine/cost/profiles/interference.json``).

    python scripts/model_interference.py

A measured table (same rows, measured slowdowns) replaces the file without code changes. The
model and its constants are described in ``docs/cost-model.md`` (Interference).
"""

from __future__ import annotations

import json

from jigsaw_engine.cost.interference import MODELLED_DESCRIPTION, TABLE_PATH, table_rows

if __name__ == "__main__":
    TABLE_PATH.write_text(json.dumps({"description": MODELLED_DESCRIPTION, "rows": table_rows()}, indent=1) + "\n")
    print(f"wrote {TABLE_PATH}")
