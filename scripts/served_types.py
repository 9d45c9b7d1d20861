"""Print the docs' served-types page from the local cloud's registry; `--write` writes it to
docs/reference/local-cloud-types.md (tests/unit/test_localcloud_reference.py fails while the
committed page differs)."""

from __future__ import annotations

import sys
from pathlib import Path

from stackflow.localcloud.reference import PAGE, page

if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        target = Path(__file__).resolve().parents[1] / PAGE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page())
    else:
        sys.stdout.write(page())
