"""A project's program runs in a process of its own (`stackflow.engine.automation.host`), tested
through `python flows/run.py rehearse` and the engine, on the real Pulumi engine and the session's
**local cloud** (moto on loopback, not AWS).

What it protects against, each broken on purpose once: a program looping at import or sleeping in
an `apply` ends within seconds of one Ctrl-C or a SIGTERM; a program that calls `os._exit(0)` in
the middle of an update fails the rehearsal with a summary (a CI must never read success); the
program's environment holds none of stackflow's settings or secrets, and a secret it reads from a
file and exports is masked in the summary, `--json` and the log; two programs running at once
each keep their own working directory, `sys.path` and modules.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from stackflow import exits
from tests.faults.helpers import wait_until
from tests.integration.project_support import rehearse_env, write_project
from tests.realenv import ROOT, RUN_PY, cli

pytestmark = pytest.mark.integration

MARKED = """import os
import pathlib

import pulumi

MARKER = pathlib.Path(pulumi.Config().require("marker"))
"""

LOOPS_AT_IMPORT = (
    MARKED
    + """MARKER.write_text(str(os.getpid()))
while True:  # ignores everything a program could be asked
    pass
"""
)

SLEEPS_IN_APPLY = (
    MARKED
    + """import time

import pulumi_aws as aws


def slow(bucket):
    MARKER.write_text(str(os.getpid()))
    time.sleep(3600)
    return bucket


pulumi.export("bucket", aws.s3.Bucket("slow").id.apply(slow))
"""
)

EXITS_IN_APPLY = """import os

import pulumi
import pulumi_aws as aws

pulumi.export("bucket", aws.s3.Bucket("quitter").id.apply(lambda _: os._exit(0)))
"""

READS_SECRETS = """import os
import pathlib

import pulumi

config = pulumi.Config()
found = pathlib.Path(config.require("passfile")).read_text().strip()
print("the program read", found)
pulumi.export("read_from_file", found)
pulumi.export(
    "withheld",
    ",".join(sorted(k for k in os.environ if k.startswith(("STACKFLOW_", "PULUMI_CONFIG", "PULUMI_ACCESS")))),
)
"""

# Both programs reach this point before either goes on: they run at once, each in its own process.
MEETS = """import os
import pathlib
import sys
import time

import pulumi

import helpers  # a module of the same name in both projects

here = pathlib.Path(pulumi.Config().require("meeting"))
(here / helpers.NAME).write_text(str(os.getpid()))
deadline = time.monotonic() + 120
while len(list(here.iterdir())) < 2:
    if time.monotonic() > deadline:
        raise RuntimeError("the other program never started")
    time.sleep(0.05)
pulumi.export("folder", os.getcwd())
os.chdir("..")  # a program may change its working directory: only its own
pulumi.export("name", helpers.NAME)
pulumi.export("helpers", helpers.__file__)
pulumi.export("first_path", sys.path[0])
pulumi.export("pid", os.getpid())
"""


def _stack_file(folder: Path, **values: str) -> None:
    name = (folder / "Pulumi.yaml").read_text().split("\n", 1)[0].removeprefix("name: ")
    lines = "".join(f"  {name}:{k}: {v}\n" for k, v in values.items())
    (folder / "Pulumi.dev.yaml").write_text(f"config:\n{lines}")


def _start(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`rehearse` as a terminal's foreground job: its own process group, output to `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, str(RUN_PY), "rehearse", *args],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _ends_within_seconds(
    folder: Path, env: dict[str, str], tmp_path: Path, signum: int
) -> tuple[int, float, int]:
    """Rehearse the project, wait for its program to write its pid, send `signum` to the
    rehearsal's process group as a terminal would: (exit code, seconds to end, program pid)."""
    marker = tmp_path / f"{folder.name}.pid"
    _stack_file(folder, marker=str(marker))
    log = tmp_path / f"{folder.name}.log"
    run = _start(env, log, str(folder))
    try:
        wait_until(
            lambda: marker.exists() or run.poll() is not None,
            timeout=180,
            what="the program to start",
        )
        assert run.poll() is None, log.read_text()
        pid = int(marker.read_text())
        sent = time.monotonic()
        os.killpg(run.pid, signum)
        code = run.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    wait_until(lambda: not _alive(pid), timeout=10, what=f"the program's process {pid} to end")
    return code, took, pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_one_ctrl_c_ends_a_program_looping_at_import_within_seconds(
    tmp_path: Path, local_cloud: Any
) -> None:
    """Local cloud: the program loops at import in its own process; one SIGINT to the rehearsal's
    process group (a terminal's Ctrl-C) ends the rehearsal, interrupted, and the program."""
    folder = write_project(tmp_path / "looper", "looping-program", LOOPS_AT_IMPORT, {})
    code, took, _ = _ends_within_seconds(
        folder, rehearse_env(tmp_path, local_cloud), tmp_path, signal.SIGINT
    )
    assert code == exits.INTERRUPTED
    assert took < 15, f"{took:.1f}s after one Ctrl-C"


def test_sigterm_ends_a_rehearsal_whose_apply_sleeps_within_seconds(
    tmp_path: Path, local_cloud: Any
) -> None:
    """Local cloud: the bucket is created, then the program sleeps in its `apply` for an hour;
    SIGTERM ends the rehearsal (terminated) and the program within seconds."""
    folder = write_project(tmp_path / "sleeper", "sleeping-program", SLEEPS_IN_APPLY, {})
    code, took, _ = _ends_within_seconds(
        folder, rehearse_env(tmp_path, local_cloud), tmp_path, signal.SIGTERM
    )
    assert code == exits.TERMINATED
    assert took < 20, f"{took:.1f}s after SIGTERM"


def test_a_program_that_exits_in_the_middle_of_an_update_fails_with_a_summary(
    tmp_path: Path, local_cloud: Any
) -> None:
    """Local cloud: `os._exit(0)` in an `apply` once the bucket exists ends the program's process,
    not stackflow: the rehearsal fails (exit 1) with its summary, saying what happened."""
    folder = write_project(tmp_path / "quitter", "quitting-program", EXITS_IN_APPLY, {})
    result = cli(rehearse_env(tmp_path, local_cloud), "rehearse", str(folder), "--json")
    assert result.returncode == exits.FAILED, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    (stack,) = summary["stacks"]
    assert stack["status"] == "failed", stack
    said = "the program's process ended in the middle of the operation (exit 0"
    assert said in summary["failed"] and said in stack["note"], summary
    assert "Traceback" not in result.stderr


def test_the_program_sees_none_of_stackflows_secrets_and_what_it_reads_is_masked(
    tmp_path: Path, local_cloud: Any
) -> None:
    """Local cloud: the program's environment holds no STACKFLOW_* variable, no state or project
    passphrase and no access token; the state passphrase it reads from the local cloud's file and
    prints and exports is masked in the summary, --json and the log."""
    from stackflow.localcloud.paths import passphrase, passphrase_file

    secret = passphrase(local_cloud.root)
    folder = write_project(tmp_path / "reader", "reading-program", READS_SECRETS, {})
    _stack_file(folder, passfile=str(passphrase_file(local_cloud.root)))
    env = {
        **rehearse_env(tmp_path, local_cloud),
        "PULUMI_CONFIG_PASSPHRASE": "the-projects-own-passphrase",
    }
    table = cli(env, "rehearse", str(folder))
    assert table.returncode == exits.OK, table.stdout + table.stderr
    result = cli(env, "rehearse", str(folder), "--json")
    assert result.returncode == exits.OK, result.stdout + result.stderr
    outputs = json.loads(result.stdout)["stacks"][0]["outputs"]
    assert outputs == {"read_from_file": "[secret]", "withheld": ""}, outputs
    logs = [p.read_text() for p in (tmp_path / "state" / "logs").glob("rehearse-*.log")]
    assert any("the program read [secret]" in text for text in logs), logs
    said = [table.stdout, table.stderr, result.stdout, result.stderr, *logs]
    assert all(secret not in text for text in said)


def test_two_programs_running_at_once_keep_their_own_folder_path_and_modules(
    tmp_path: Path, local_cloud: Any
) -> None:
    """Local cloud, through the engine in this process: two projects whose programs import a
    module of the same name run at once (each waits until the other has started); each sees its
    own module, folder first on sys.path, and a process that is neither this one nor the
    other's; the chdir one makes does not move the other nor this process."""
    from stackflow.engine import get_engine
    from stackflow.rehearse import Action, listener_for, prepare, run
    from tests.realenv import settings_for

    meeting = tmp_path / "meeting"
    meeting.mkdir()
    folders = {}
    for name in ("east", "west"):
        folders[name] = write_project(
            tmp_path / name, f"meets-{name}", MEETS, {"helpers.py": f"NAME = {name!r}\n"}
        )
        _stack_file(folders[name], meeting=str(meeting))
    env = rehearse_env(tmp_path, local_cloud)
    machine = {k: v for k, v in env.items() if k.startswith("STACKFLOW_")}
    settings = settings_for(machine, "dev", "local")
    engine = get_engine(settings)
    here = os.getcwd()
    outcomes: dict[str, Any] = {}

    def rehearse(name: str) -> None:
        rehearsal = prepare(folders[name], "dev", Action.UP, settings, {})
        outcomes[name] = run(rehearsal, engine, listener_for(rehearsal, lambda _line: None))

    threads = [threading.Thread(target=rehearse, args=(n,)) for n in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert os.getcwd() == here
    pids = set()
    for name, folder in folders.items():
        outcome = outcomes[name]
        assert outcome.error is None, outcome.error
        found = {k: v.value for k, v in outcome.outputs.items()}
        assert found["name"] == name and found["folder"] == str(folder)
        assert found["helpers"] == str(folder / "helpers.py")
        assert found["first_path"] == str(folder)
        pids.add(found["pid"])
    assert len(pids) == 2 and os.getpid() not in pids


def _hosts_of_this_process() -> list[int]:
    """The live program processes this test process started (`python -m ...host`)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
        ours = parent == os.getpid() and b"stackflow.engine.automation.host" in cmdline
        if ours and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_cancel_ends_the_programs_process_while_its_operation_still_runs(
    tmp_path: Path,
) -> None:
    """A cancel (`Hosts.kill`, which the engine's cancel calls) ends the program's process at
    once, while the operation is still being served; not only once the operation ends (its
    stdin closed, then killed seconds later). The program's process runs in a session of its
    own, so no Ctrl-C reaches it but this one. No engine runs here: the program is served,
    never asked to run."""
    from stackflow.engine.automation.host import Hosts
    from stackflow.engine.base import Listener, StackSpec
    from stackflow.engine.hosted import HostedProgram

    folder = tmp_path / "idle"
    folder.mkdir()
    (folder / "__main__.py").write_text("raise SystemExit('never run here')\n")
    program = HostedProgram(folder, folder / "__main__.py", "idle/dev")
    spec = StackSpec("idle", "dev", "idle", program=program, pulumi_name="idle")
    hosts = Hosts()
    with hosts.serving(spec, program, {}, Listener()) as address:
        assert address, "the program's process serves the engine"
        (pid,) = _hosts_of_this_process()
        hosts.kill(spec.label)
        wait_until(lambda: not _alive(pid), timeout=10, what=f"the program's process {pid} to end")
    assert _hosts_of_this_process() == []
