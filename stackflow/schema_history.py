"""The name of the table where the migration runner records which files ran.

A neutral home: the runner (stackflow.migrator) writes the table, and the local cloud's stand-in
app reads its latest version; the local cloud must not import the runner for one name.
"""

from __future__ import annotations

HISTORY_TABLE = "stackflow_schema_history"
