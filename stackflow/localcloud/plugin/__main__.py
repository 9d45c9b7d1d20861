"""`python -m stackflow.localcloud.plugin aws|random`: serve a provider plugin (see serve.py)."""

from __future__ import annotations

from stackflow.localcloud.plugin.serve import main

main()
