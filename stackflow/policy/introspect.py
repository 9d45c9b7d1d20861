"""Run by a pack's virtualenv, not by stackflow: `python introspect.py <pack folder>` prints, as
JSON, the rules the pack's `__main__.py` declares (name, level, description), without serving
them. It imports nothing of stackflow's: the virtualenv has pulumi-policy, not stackflow."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
from typing import Any


def _level(value: Any, default: str) -> str:
    return str(getattr(value, "value", value) or default)


def main() -> None:
    """Print the pack's rules as one JSON list, one entry per PolicyPack the pack builds."""
    folder = os.path.abspath(sys.argv[1])
    found: list[dict[str, Any]] = []

    class Recorder:
        """Stands in for pulumi_policy.PolicyPack: records what it is given, serves nothing."""

        def __init__(
            self, name: str, policies: Any = (), enforcement_level: Any = None, **_: Any
        ) -> None:
            pack_level = _level(enforcement_level, "advisory")
            rules = [
                {
                    "name": p.name,
                    "level": _level(getattr(p, "enforcement_level", None), pack_level),
                    "description": getattr(p, "description", ""),
                }
                for p in policies
            ]
            found.append({"pack": name, "rules": rules})

    module = importlib.import_module("pulumi_policy")
    setattr(module, "PolicyPack", Recorder)  # noqa: B010 (the pack imports it by this name)
    os.chdir(folder)
    sys.path.insert(0, folder)
    runpy.run_path(os.path.join(folder, "__main__.py"), run_name="__main__")
    print(json.dumps(found))


if __name__ == "__main__":
    main()
