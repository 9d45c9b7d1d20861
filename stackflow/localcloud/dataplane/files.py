"""The data plane's records: small JSON files written whole, and the names it accepts for them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from stackflow.localcloud.errors import DataplaneError

# Identifiers become folder and file names: AWS's own characters only, no path tricks.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,254}$")


def safe(kind: str, name: str | None) -> str:
    """`name` if the data plane can use it as a file name.

    Raises:
        DataplaneError: naming the kind and what is accepted.
    """
    if not name or not SAFE_NAME.match(name):
        raise DataplaneError(
            f"{kind} {name!r} cannot be served by the local cloud's data plane; expected letters, "
            "digits and hyphens (as AWS accepts)"
        )
    return name


def write_json(path: Path, data: Any) -> None:
    """Write `data` beside `path`, then rename: a reader never sees half a record."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = path.with_name(f"{path.name}.writing")
    staging.write_text(json.dumps(data, indent=2, sort_keys=True))
    staging.replace(path)


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
