"""`python -m stackflow.engine.automation.host`: the program's own process (see `child`)."""

from __future__ import annotations

from stackflow.engine.automation.host.child import main

if __name__ == "__main__":
    main()
