"""What `python flows/run.py` shows while it works, on the real Pulumi engine and the session's
**local cloud** (moto on loopback, not AWS): a live view updated in place in a terminal, Ctrl-C
acknowledged at once, plain timestamped lines and a heartbeat through a pipe, Prefect's and
Pulumi's own lines in a log file (and live with -v), a traceback only for a bug."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stackflow import exits
from tests.realenv import ROOT, RUN_PY, cli, process_env, real_variables, summary_of, unique
from tests.terminal import CTRL_C, Terminal

pytestmark = pytest.mark.integration
TIMESTAMPED = re.compile(r"^\d\d:\d\d:\d\d \S")


@pytest.fixture
def env(tmp_path: Path, local_cloud: Any, prefect_server: Any) -> Iterator[dict[str, str]]:
    """The CLI's environment for one test: its own state folder, the session's local cloud; the
    knobs the test sets are cleared after it."""
    from stackflow.localcloud.knobs import clear_knobs

    yield process_env(real_variables(tmp_path / "state", local_cloud, prefect_server))
    clear_knobs(local_cloud.url)


def _log_of(stderr: str) -> str:
    found = re.findall(r"(?:^log: |the full log is )(\S+\.log)", stderr, re.MULTILINE)
    assert found, stderr
    return Path(found[-1]).read_text()


def test_in_a_terminal_the_live_view_updates_in_place_and_ctrl_c_is_acknowledged_at_once(
    env: dict[str, str], local_cloud: Any, prefect_server: Any
) -> None:
    """Local cloud, every resource operation of the environment slowed to 2 s: `up` in a
    pseudo-terminal draws one row per node and redraws it in place (the resource in progress
    under the running stack, resources done out of declared), prints none of Prefect's log
    lines; Ctrl-C is acknowledged within a second, Pulumi cancels cleanly, the run exits 130 and
    its flow run ends Cancelled; the next `up` clears what was left and completes."""
    from prefect.client.orchestration import get_client

    from stackflow.localcloud.knobs import set_knobs

    name = unique("dev")
    set_knobs(local_cloud.url, {"latency_s": {f"env:{name}": 2.0}})
    term = Terminal([sys.executable, str(RUN_PY), "up", "--env", name], env, ROOT)
    try:
        term.wait_for(r"networking\s+running\s+\d+s\s+\d+/\d+ resources", timeout=120)
        term.wait_for(r"creating aws:\S+ \S+ \(\d+s\)", timeout=60)
        before = len(term.raw)
        sent = term.send(CTRL_C)
        acknowledged = term.wait_for(r"interrupted: cancelling the running operations", 10)
        code = term.wait(timeout=120)
    finally:
        term.kill()
    assert acknowledged - sent < 1.0, f"acknowledged after {acknowledged - sent:.2f}s"
    assert code == exits.INTERRUPTED, term.text[-3000:]
    drawn = term.raw[:before]
    # redrawn in place: the cursor goes up over the board and lines are erased, many times
    assert drawn.count("\x1b[1A") > 10 and drawn.count("\x1b[2K") > 10
    assert drawn.count("networking") > 5
    text = term.text
    assert "| INFO" not in text and "Traceback" not in text  # Prefect's lines are in the log
    table = text[text.rindex("stack       status") :]
    assert re.search(r"^networking\s+cancelled\s", table, re.M), table
    assert re.search(r"^database\s+not run\s.*the run was interrupted first", table, re.M), table
    assert "error: interrupted: running operations were cancelled" in text
    run_id = re.findall(r"runs/flow-run/([0-9a-f-]{36})", text)[-1]
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run_id).state
    assert state is not None and state.is_cancelled(), state

    again = cli(env, "up", "--env", name, "--stacks", "networking")
    assert again.returncode == 0, again.stdout + again.stderr
    assert summary_of(again)["networking"] in ("updated", "unchanged"), again.stdout


def test_through_a_pipe_plain_lines_a_retry_and_a_heartbeat_and_the_log_holds_the_rest(
    env: dict[str, str], local_cloud: Any
) -> None:
    """Local cloud: AWS throttles the VPC once (a knob) and every operation takes 0.4 s; `up`
    through a pipe prints one timestamped line per state change (the retry with its reason and
    the next attempt's time), a heartbeat for the quiet stack, no escape codes and none of
    Prefect's or Pulumi's lines; those are in the log file it names. The summary lists the
    retry. `-v` shows them as they come."""
    from stackflow.localcloud.knobs import set_knobs

    name = unique("dev")
    set_knobs(
        local_cloud.url,
        {
            "latency_s": {f"env:{name}": 0.4},
            "faults": [
                {
                    "kind": "transient",
                    "count": 1,
                    "environment": name,
                    "type": "aws:ec2/vpc:Vpc",
                }
            ],
        },
    )
    env = env | {"STACKFLOW_RETRY_DELAY_S": "2"}
    run = cli(env, "up", "--env", name, "--stacks", "networking", "--heartbeat", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    progress = [line for line in run.stderr.splitlines() if TIMESTAMPED.match(line)]
    assert "\x1b[" not in run.stderr + run.stdout
    assert "| INFO" not in run.stderr and "Updating (" not in run.stderr
    said = "\n".join(line[9:] for line in progress)
    assert said.startswith(f"up {name}  [local cloud]: networking\nnetworking: running"), said
    assert re.search(
        r"^networking: attempt 1 failed: AWS throttled the requests \(Throttling on EC2 "
        r"CreateVpc\).*; attempt 2 at \d\d:\d\d:\d\d \(in \ds\)$",
        said,
        re.M,
    ), said
    assert re.search(r"^networking: running \(attempt 2\)$", said, re.M), said
    assert re.search(
        r"^networking: still running \d+s, \d+/\d+ resources(; (creating|updating) aws:\S+ \S+ "
        r"\(\d+s\)( and \d+ more)?)?$",
        said,
        re.M,
    ), said
    assert re.search(r"^networking: updated \(\d+ created\) in \d+s$", said, re.M), said
    assert re.search(
        r"^networking: attempt 1 failed and was retried: AWS throttled", run.stdout, re.M
    ), run.stdout
    log = _log_of(run.stderr)
    assert f"Beginning flow run 'deploy-{name}'" in log and "Updating (" in log

    verbose = cli(env, "preview", "--env", name, "--stacks", "networking", "-v")
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    assert re.search(r"^\d\d:\d\d:\d\d \| INFO    \| Previewing update", verbose.stderr, re.M)


def test_an_expected_failure_prints_no_traceback_and_says_what_to_do(
    env: dict[str, str], local_cloud: Any
) -> None:
    """Local cloud: AWS refuses the VPC for good (a knob): exit 1, the summary, one `error:` line
    naming the stack and AWS's code, then what to do, and no traceback anywhere."""
    from stackflow.localcloud.knobs import set_knobs

    name = unique("dev")
    set_knobs(
        local_cloud.url,
        {
            "faults": [
                {
                    "kind": "permanent",
                    "code": "VpcLimitExceeded",
                    "message": "the local cloud's knob refused this VPC",
                    "environment": name,
                    "type": "aws:ec2/vpc:Vpc",
                }
            ]
        },
    )
    run = cli(env, "up", "--env", name, "--stacks", "networking", "--json")
    assert run.returncode == exits.FAILED
    assert "Traceback" not in run.stdout + run.stderr
    assert json.loads(run.stdout)["stacks"][0]["status"] == "failed"  # stdout is only the JSON
    error, to_do = run.stderr.rstrip().splitlines()[-2:]
    assert error.startswith(f"error: stack '{name}/networking': AWS refused the request"), error
    assert "VpcLimitExceeded" in error
    assert to_do.startswith("  what to do: fix what it names, then run it again; the full log is")


def test_a_bug_prints_its_traceback_and_where_to_report_it(
    tmp_path: Path,
    local_cloud: Any,
    prefect_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An error stackflow does not expect (here a TypeError planted in the pipeline) is the one
    case with a traceback: exit 70, the traceback, and a line saying it is a bug and what to send."""
    import flows.operation
    from cli.main import main

    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in real_variables(tmp_path / "state", local_cloud, prefect_server).items():
        monkeypatch.setenv(key, value)

    def broken(*_: Any, **__: Any) -> None:
        raise TypeError("planted for the test")

    monkeypatch.setattr(flows.operation, "walk_graph", broken)
    code = main(["up", "--env", unique("dev"), "--stacks", "networking"])
    err = capsys.readouterr().err
    assert code == exits.BUG, err
    assert "Traceback (most recent call last)" in err and "TypeError: planted for the test" in err
    assert re.search(
        r"^error: unexpected TypeError inside stackflow: this is a bug\. Please report it to the "
        r"stackflow maintainers with the traceback above and the log \S+\.log\.$",
        err,
        re.M,
    ), err
