"""stackflow: deploy networking, database and app stacks as one Prefect pipeline."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout this package was installed from (editable install); holds migrations/ and .stackflow/."""

try:
    from importlib.metadata import version as _version

    __version__ = _version("stackflow")
except Exception:  # not installed (a checkout on PYTHONPATH): still a version records can carry
    __version__ = "0+unknown"
