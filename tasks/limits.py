"""One operation per environment and stack at a time, across all runs: Prefect global concurrency
limits (limit 1) named `stackflow-<environment>-<stack>`, held with a lease.

We call the client's lease API directly rather than `prefect.concurrency.sync.concurrency`: in
3.8.8 that helper, used from task threads, made acquisitions of *different* limits wait for each
other, which serialised stacks that should run at once.

A killed process cannot release its slot. Prefect's lease expires it after `LEASE_S` on a
long-running server; an embedded (temporary) server loses the lease with the process, so we also
record the holder's pid and, when that process is gone from this machine, release its slot.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from stackflow.infrastructure import replace_file

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

LEASE_S = 60.0  # the server's minimum; renewed every 45 s while the operation runs


def limit_name(environment: str, stack: str) -> str:
    return f"stackflow-{environment}-{stack}"


MAX_WAIT_STEP_S = 5.0  # never sleep longer than this between two tries for a held slot
# A server on SQLite answers 503 ("database is locked") when a slot write meets one of its own
# writes, and Prefect's client then sleeps 2 s, then 4 s. The writes take milliseconds, so tasks
# of one process take turns for them (not for the slot), and a 503 is retried after tens of ms.
_SLOT_WRITES = threading.Lock()
QUICK_TRIES = 50


def _quick_post(client: SyncPrefectClient, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST a slot write; a 503 is tried again after 20-250 ms instead of the client's 2-4 s.

    Safe to repeat: a 503 from SQLite's lock means the transaction was rolled back, and releasing
    a lease that is already gone is a no-op on the server. Raises `httpx.HTTPStatusError` on any
    other error status (423 when the slot is held).
    """
    http = client._client  # the configured httpx client: base URL and auth headers
    for attempt in range(QUICK_TRIES):
        response = httpx.Client.send(http, http.build_request("POST", path, json=body))
        if response.status_code == 403 and "CSRF" in response.text:
            break  # a server with CSRF protection: the client's own path fetches the token
        if response.status_code != 503:
            response.raise_for_status()
            return response
        time.sleep(random.uniform(0.02, 0.05) * min(attempt + 1, 5))
    return client.request("POST", path, json=body)  # type: ignore[arg-type]  # the client's path


@contextlib.contextmanager
def _leased_slot(
    name: str,
    waiting: Callable[[str], None],
    cancelled: Callable[[], bool],
    released: threading.Event,
) -> Iterator[str]:
    """Take one slot of limit `name` with a lease, keep the lease renewed, release it on exit;
    `waiting` is told once if another run holds it.

    Raises:
        SlotWaitCancelled: the run was interrupted while it waited (nothing was taken).
    """
    waited = False
    with get_client(sync_client=True) as client:
        while True:
            try:
                with _SLOT_WRITES:
                    response = _quick_post(
                        client,
                        "/v2/concurrency_limits/increment-with-lease",
                        {
                            "names": [name],
                            "slots": 1,
                            "mode": "concurrency",
                            "lease_duration": LEASE_S,
                        },
                    )
                break
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 423:
                    raise
                if not waited:
                    waiting(f"another run holds {name}")
                    waited = True
                retry_after = float(exc.response.headers.get("Retry-After", 1.0))
                deadline = time.monotonic() + min(max(retry_after, 0.2), MAX_WAIT_STEP_S)
                while time.monotonic() < deadline:  # an interrupt ends the wait at once
                    if cancelled():
                        raise SlotWaitCancelled(name) from None
                    time.sleep(0.1)
        lease_id = response.json()["lease_id"]
    stop = threading.Event()

    def renew() -> None:
        with get_client(sync_client=True) as renewer:
            while not stop.wait(LEASE_S * 0.75):
                with contextlib.suppress(Exception):  # a missed renewal is retried next round
                    renewer.renew_concurrency_lease(lease_id=lease_id, lease_duration=LEASE_S)

    # The renewer runs in this task's context: a plain thread would read Prefect's settings from
    # the process root (PREFECT_API_URL as it was at import) and may talk to another server.
    renew_here = contextvars.copy_context().run
    thread = threading.Thread(target=renew_here, args=(renew,), name=f"lease-{name}", daemon=True)
    thread.start()
    try:
        yield str(lease_id)
    finally:
        stop.set()
        try:
            with get_client(sync_client=True) as client, _SLOT_WRITES:
                _quick_post(
                    client, "/v2/concurrency_limits/decrement-with-lease", {"lease_id": lease_id}
                )
            released.set()
        except Exception:  # the server is gone: its lease expires, or the holder file heals it
            pass


class SlotWaitCancelled(Exception):
    """The run was interrupted while it waited for a stack's slot: nothing was taken."""


def _never() -> bool:
    return False


def _unlink_if(released: threading.Event, path: Path) -> None:
    if released.is_set():
        path.unlink(missing_ok=True)


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
    holders: Path,
    environment: str,
    stack: str,
    say: Callable[[str], None],
    waiting: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] = _never,
) -> Iterator[None]:
    """Hold the stack's slot for the duration of the block; waits while another run holds it.

    Args:
        say: told what the slot freed that a dead run held.
        waiting: told (once) that another run holds the slot; default: `say`, as "waiting: ...".
        cancelled: asked while waiting; True ends the wait (SlotWaitCancelled), nothing taken.
    """
    name = limit_name(environment, stack)
    holders.mkdir(parents=True, exist_ok=True)
    holder = holders / f"{name}.json"
    # Prefect's upsert reads, then creates: another process may create the limit in between.
    with (
        get_client(sync_client=True) as client,
        _SLOT_WRITES,
        contextlib.suppress(ObjectAlreadyExists),
    ):
        client.upsert_global_concurrency_limit_by_name(name, limit=1)
    with contextlib.ExitStack() as stack_ctx:
        with open(holders / f"{name}.lock", "a+") as guard:
            # Check-and-release plus acquire happen under one file lock, so two runs that both
            # find a dead holder cannot both release the slot and then both hold it.
            fcntl.flock(guard, fcntl.LOCK_EX)
            if holder.exists():
                info = json.loads(holder.read_text() or "{}")
                if info.get("host") == socket.gethostname() and not _alive(int(info.get("pid", 0))):
                    # Release exactly the dead run's lease (a no-op if it expired meanwhile and
                    # another run holds the slot now), never the slot count as a whole.
                    if info.get("lease_id"):
                        with (
                            get_client(sync_client=True) as client,
                            _SLOT_WRITES,
                            contextlib.suppress(httpx.HTTPStatusError),
                        ):
                            _quick_post(
                                client,
                                "/v2/concurrency_limits/decrement-with-lease",
                                {"lease_id": info["lease_id"]},
                            )
                    say(
                        f"released the concurrency slot of {environment}/{stack} held by pid "
                        f"{info.get('pid')}, which is gone (an interrupted run)"
                    )
                holder.unlink(missing_ok=True)
            released = threading.Event()
            # LIFO: the holder file goes after the slot's release, and only if it was released
            # (a run whose server vanished leaves it, so the next run here frees the slot)
            stack_ctx.callback(_unlink_if, released, holder)
            lease_id = stack_ctx.enter_context(
                _leased_slot(
                    name, waiting or (lambda why: say(f"waiting: {why}")), cancelled, released
                )
            )
            record = {"pid": os.getpid(), "host": socket.gethostname(), "lease_id": lease_id}
            replace_file(holder, json.dumps(record))  # whole, or named when the disk is full
        yield


def prune_limits(environment: str, stacks: list[str]) -> int:
    """Delete the concurrency limits of an environment that is gone (cleanup of ephemeral
    environments: otherwise every pr-<n> leaves three limits behind forever); how many."""
    removed = 0
    with get_client(sync_client=True) as client:
        for stack in stacks:
            with contextlib.suppress(ObjectNotFound):
                client.delete_global_concurrency_limit_by_name(limit_name(environment, stack))
                removed += 1
    return removed


WHOLE_ENVIRONMENT = "environment"  # the scope of a slot held for a whole run, not one stack


@contextlib.contextmanager
def environment_slot(
    holders: Path,
    environment: str,
    waiting: Callable[[str], None],
    cancelled: Callable[[], bool] = _never,
) -> Iterator[None]:
    """Hold the environment for a whole run that changes it (up, destroy, refresh): a second
    such run of the environment waits for the first instead of interleaving with it (an up and a
    destroy walk the stacks in opposite orders, so per-stack slots alone let them cross).

    Raises:
        SlotWaitCancelled: the run was interrupted while it waited (nothing was taken).
    """
    with stack_slot(
        holders,
        environment,
        WHOLE_ENVIRONMENT,
        lambda message: waiting(message),
        lambda why: waiting(f"another run of {environment} is changing it ({why}); waiting for it"),
        cancelled=cancelled,
    ):
        yield
