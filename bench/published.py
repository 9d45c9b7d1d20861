"""Rehearse published pulumi/examples Python programs on the local cloud and print a table.

    python bench/published.py EXAMPLES_CHECKOUT aws-py-appsync aws-py-resources ...

Each program folder is copied to a temporary folder (the checkout is never written to) and run
unchanged through `python flows/run.py rehearse`: up, a second up that must change nothing, and a
destroy that must leave zero resources. A program that cannot run here is counted as refused with
the first `error:` line it got (the reason). Nothing of the examples is kept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rehearse(folder: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    command = [sys.executable, str(ROOT / "flows" / "run.py"), "rehearse", str(folder), "--json"]
    done = subprocess.run([*command, *extra], capture_output=True, text=True, timeout=900, cwd=ROOT)
    summary = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, summary, done.stderr


def _why(stderr: str) -> str:
    return next((line for line in stderr.splitlines() if line.startswith("error:")), "")[:160]


def run_one(source: Path) -> tuple[str, str]:
    """(verdict, detail) for one program folder."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / source.name
        shutil.copytree(source, folder)
        code, first, err = _rehearse(folder)
        if code != 0:
            return "refused" if not first else "failed", _why(err)
        code, second, err = _rehearse(folder)
        stacks = second.get("stacks") or [{}]
        if code != 0 or stacks[0].get("status") != "unchanged":  # type: ignore[index,union-attr]
            _rehearse(folder, "--destroy")
            return "failed", "second run changed something: " + _why(err)
        code, gone, err = _rehearse(folder, "--destroy")
        left = (gone.get("stacks") or [{}])[0]  # type: ignore[index]
        if code != 0 or left.get("status") != "destroyed":  # type: ignore[union-attr]
            return "failed", "destroy: " + _why(err)
        return "ran", "preview, up, no-change up, destroy"


def main(argv: list[str]) -> int:
    checkout, names = Path(argv[0]), argv[1:]
    ran = 0
    print("| program | verdict | detail | seconds |\n|---|---|---|---|")
    for name in names:
        started = time.monotonic()
        verdict, detail = run_one(checkout / name)
        ran += verdict == "ran"
        print(f"| {name} | {verdict} | {detail} | {time.monotonic() - started:.0f} |", flush=True)
    print(f"\n{ran} of {len(names)} ran unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
