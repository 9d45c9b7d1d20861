"""Stack slots against the session's real Prefect server (no cloud involved)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tasks.limits import limit_name
from tests.realenv import ROOT, unique

pytestmark = pytest.mark.integration

# One run's process: wait for the common start time, then hold the stack's slot for 0.2 s and
# print when it held it (epoch seconds), or the error that stopped it.
_RUN = """
import json, sys, time
from pathlib import Path
from tasks.limits import stack_slot
state_dir, environment, start = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
try:
    with stack_slot(state_dir, environment, "networking", lambda _: None):
        began = time.time()
        time.sleep(0.2)
        print(json.dumps({"held": [began, time.time()]}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


def test_runs_that_first_use_a_stack_at_the_same_moment_share_one_limit_and_take_turns(
    tmp_path: Path, prefect_server: Any
) -> None:
    """Four processes entering the slot of a stack nobody used before at the same moment.
    Prefect's upsert reads, then creates, so the others find the limit created meanwhile: none
    fails on it, there is one limit, it ends free, and no two held the slot at once."""
    from prefect.client.orchestration import get_client

    environment = unique("dev")
    start = time.time() + 12  # after every process has imported Prefect
    env = {"PREFECT_API_URL": prefect_server.api_url, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _RUN, str(tmp_path / f"state-{i}"), environment, str(start)],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    results = [json.loads(run.communicate(timeout=120)[0].strip().splitlines()[-1]) for run in runs]
    assert all("held" in r for r in results), results
    held = sorted(r["held"] for r in results)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(held)), held
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(limit_name(environment, "networking"))
    assert limit.limit == 1 and limit.active_slots == 0
