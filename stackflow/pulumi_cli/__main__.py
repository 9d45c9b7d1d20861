"""`python -m stackflow.pulumi_cli [ensure|path|version]` (see command.py)."""

from __future__ import annotations

from stackflow.pulumi_cli.command import main

raise SystemExit(main())
