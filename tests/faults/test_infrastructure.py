"""The file systems under a run fail, for real, on the real engine and the **local cloud** (moto on
loopback, not AWS): the state folder and the file backend each on a small tmpfs of their own,
the backend remounted read-only, the state folder's filled to the last byte. Every command ends
with one `error:` line naming what failed and where, a `what to do:` line and exit 1: never a
traceback, never half a file; once the file system is usable again the environment is as it was.
(Mounting needs root, as a CI container runs the suite; elsewhere this module is skipped.)"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.helpers import CliRun, FaultEnv

pytestmark = pytest.mark.faults


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `folder` (made) for the block."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a small file system of its own is mounted")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)], check=True
    )
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def remount(folder: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(folder)], check=True)


def named(run: CliRun, *words: str) -> None:
    """The run failed with exit 1, an `error:` line holding `words`, a `what to do:` line, and no
    traceback or logging error anywhere in what it printed."""
    assert run.returncode == 1, run
    for word in words:
        assert word in run.error_line, run
    assert "  what to do: " in run.stderr, run
    for noise in ("Traceback", "--- Logging error ---", "Error logging to API", "this is a bug"):
        assert noise not in run.output, run


def whole(folder: Path) -> list[str]:
    """Every file under `folder` that is half-written: a staging file left behind, or a JSON
    file (a record, a checkpoint) that does not parse."""
    broken = []
    for path in folder.rglob("*"):
        if path.is_file() and path.name.endswith(".tmp"):
            broken.append(str(path))
        elif path.is_file() and path.suffix == ".json":
            try:
                json.loads(path.read_bytes())
            except ValueError:
                broken.append(str(path))
    return broken


def test_a_read_only_backend_and_a_full_state_folder_are_named_and_nothing_is_half_written(
    fault_env: FaultEnv, tmp_path: Path
) -> None:
    """Local cloud, networking deployed to a file backend on a tmpfs of its own, the state folder
    on another:

    - the backend remounted read-only: `up --force`, `refresh` and `destroy` each name the
      read-only file system and the record they could not write; with the records elsewhere,
      the Pulumi CLI's own write (its lock) is named the same way; the checkpoint is unchanged;
    - the backend writable again and the state folder full: `up --force` and `destroy` name the
      full device and the file, and say to free space;
    - space freed: `up` finds networking unchanged (no engine call), and no file of either is
      half-written."""
    env = fault_env.environment
    with tmpfs(tmp_path / "backend", "16m") as backend, tmpfs(fault_env.state_dir, "16m") as state:
        team = {"STACKFLOW_BACKEND_URL": f"file://{backend}"}
        first = fault_env.main("up", "--env", env, "--stacks", "networking", env=team)
        assert first.returncode == 0, first
        checkpoint = backend / ".pulumi" / "stacks" / "stackflow-networking" / f"{env}.json"
        deployed = checkpoint.read_bytes()

        remount(backend, "ro")
        try:
            for command in (("up", "--force"), ("refresh",), ("destroy", "--yes")):
                run = fault_env.main(*command, "--env", env, "--stacks", "networking", env=team)
                named(run, "a read-only file system: writing ", f"{backend}/.stackflow/")
            elsewhere = {**team, "STACKFLOW_RECORDS_URL": str(state / "other-records")}
            run = fault_env.main(
                "up", "--force", "--env", env, "--stacks", "networking", env=elsewhere
            )
            named(run, "a read-only file system: a write of the Pulumi CLI's", str(backend))
        finally:
            remount(backend, "rw")
        assert checkpoint.read_bytes() == deployed

        subprocess.run(
            ["dd", "if=/dev/zero", f"of={state / 'filler'}", "bs=64k"], capture_output=True
        )
        for command in (("up", "--force"), ("destroy", "--yes")):
            run = fault_env.main(*command, "--env", env, "--stacks", "networking", env=team)
            named(run, "no space left on the device: writing ", str(state))
            assert "free space on the file system that holds" in run.stderr, run
        (state / "filler").unlink()

        again = fault_env.main("up", "--env", env, "--stacks", "networking", env=team)
        assert again.returncode == 0 and "engine operations: 0;" in again.stdout, again
        assert checkpoint.read_bytes() == deployed
        assert whole(backend) == [] and whole(state) == []
