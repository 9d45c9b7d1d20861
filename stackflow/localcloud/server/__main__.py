"""`python -m stackflow.localcloud.server`: the local cloud's server process (see process.py)."""

from __future__ import annotations

from stackflow.localcloud.server.process import main

main()
