"""Two malloc arenas in a process that runs flows (stackflow/arenas.py), counted by glibc itself:
`malloc_stats()` prints one "Arena <n>:" block per arena."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackflow import arenas

ROOT = Path(__file__).resolve().parents[2]

# Eight threads alive at once, each allocating: glibc gives each its own arena up to its limit
# (eight per core unless told otherwise); then glibc prints its arenas.
THREADS = """
import ctypes, sys, threading
from stackflow import arenas
print(arenas.limit() if sys.argv[1] == "limit" else "not asked", flush=True)
gate = threading.Barrier(9)
def work():
    kept = [bytearray(300_000) for _ in range(4)]
    gate.wait()
    gate.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
gate.wait()
ctypes.CDLL(None).malloc_stats()
gate.wait()
"""


def _arenas(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k != arenas.VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", THREADS, mode],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip(), done.stderr.count("Arena ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas")
def test_limit_keeps_a_threaded_process_to_two_arenas_and_without_it_there_are_more() -> None:
    said, limited = _arenas("limit")
    assert said == "True"
    assert 1 <= limited <= arenas.ARENAS
    said, unlimited = _arenas("none")
    assert said == "not asked"
    assert unlimited > arenas.ARENAS  # the limit is what made the difference


def test_a_machines_own_setting_is_left_as_it_is() -> None:
    said, count = _arenas("limit", MALLOC_ARENA_MAX="3")
    assert said == "False"
    assert count <= 3


def test_workers_give_each_flow_run_two_arenas() -> None:
    import yaml  # type: ignore[import-untyped]

    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    for deployment in spec["deployments"]:
        env = deployment["work_pool"]["job_variables"]["env"]
        assert env[arenas.VARIABLE] == str(arenas.ARENAS), deployment["name"]
