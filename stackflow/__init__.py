"""stackflow: deploy networking, database and app stacks as one Prefect pipeline."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout this package was installed from (editable install); holds migrations/ and .stackflow/."""
