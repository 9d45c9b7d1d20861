"""Stacks whose next `up` may not be skipped although their stamp matches: drift was found (the
cloud differs from the state: refresh first, then put it back) or a refresh took the cloud's
values into the state (the update puts the code's back). Kept with stackflow's records."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from stackflow.engine.base import StackSpec

DRIFTED = "drifted"  # refresh first, then update
REFRESHED = "refreshed"  # the state holds the cloud's values: update


class DriftMarks:
    """Drift found by `drift`, per stack, until an `up` or `destroy` puts the stack right."""

    def __init__(self, root: Path, scope: str) -> None:
        self.root = root / "drift" / scope

    def _path(self, spec: StackSpec) -> Path:
        return self.root / spec.pulumi_project / f"{spec.environment}.json"

    def mark(self, spec: StackSpec, why: str = DRIFTED) -> None:
        path = self._path(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(json.dumps({"found": time.time(), "why": why}))
        staging.replace(path)

    def marked(self, spec: StackSpec) -> str | None:
        """Why the stack's next up must run (DRIFTED or REFRESHED), or None."""
        try:
            return str(json.loads(self._path(spec).read_text()).get("why", DRIFTED))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return DRIFTED  # a damaged mark errs on the side of running

    def clear(self, spec: StackSpec) -> None:
        self._path(spec).unlink(missing_ok=True)
