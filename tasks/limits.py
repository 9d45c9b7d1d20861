"""One operation per environment and stack at a time, across all runs: Prefect global concurrency
limits (limit 1) named `stackflow/<environment>/<stack>`.

A killed process cannot release its slot. Prefect's lease expires it after `LEASE_S` on a
long-running server; an embedded (temporary) server loses the lease with the process, so we also
record the holder's pid and, when that process is gone from this machine, release its slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
from prefect.concurrency.sync import concurrency

LEASE_S = 60.0  # the server's minimum; renewed every 45 s while the operation runs


def limit_name(environment: str, stack: str) -> str:
    return f"stackflow-{environment}-{stack}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def stack_slot(
    state_dir: Path, environment: str, stack: str, say: Callable[[str], None]
) -> Iterator[None]:
    """Hold the stack's slot for the duration of the block; waits while another run holds it."""
    name = limit_name(environment, stack)
    holders = state_dir / "holders"
    holders.mkdir(parents=True, exist_ok=True)
    holder = holders / f"{name}.json"
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(name, limit=1)
    with contextlib.ExitStack() as stack_ctx:
        with open(holders / f"{name}.lock", "a+") as guard:
            # Check-and-release plus acquire happen under one file lock, so two runs that both
            # find a dead holder cannot both release the slot and then both hold it.
            fcntl.flock(guard, fcntl.LOCK_EX)
            if holder.exists():
                info = json.loads(holder.read_text() or "{}")
                if info.get("host") == socket.gethostname() and not _alive(int(info.get("pid", 0))):
                    with get_client(sync_client=True) as client:
                        client.update_global_concurrency_limit(
                            name, GlobalConcurrencyLimitUpdate(active_slots=0)
                        )
                    say(
                        f"released the concurrency slot of {environment}/{stack} held by pid "
                        f"{info.get('pid')}, which is gone (an interrupted run)"
                    )
                holder.unlink(missing_ok=True)
            stack_ctx.enter_context(
                concurrency(name, occupy=1, lease_duration=LEASE_S, strict=True)
            )
            holder.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
        try:
            yield
        finally:
            holder.unlink(missing_ok=True)
