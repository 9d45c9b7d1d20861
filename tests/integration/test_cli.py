"""`python flows/run.py` as users run it: a subprocess against the session's real Prefect server,
on the real Pulumi engine and the session's **local cloud** (moto on loopback, not AWS). The
commands that deploy a whole environment are tested in test_real_engine.py, on one shared
environment; these are the CLI's own answers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.realenv import ROOT, STACKS, cli, process_env, real_variables, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def env(tmp_path: Path, local_cloud: Any, prefect_server: Any) -> dict[str, str]:
    """The CLI's environment for one test: its own state folder, the session's local cloud."""
    return process_env(real_variables(tmp_path / "state", local_cloud, prefect_server))


def test_outputs_of_an_environment_never_deployed_says_so(env: dict[str, str]) -> None:
    """Local cloud: the real backend has no such stacks; each is named, none is an error."""
    name = unique("pr")
    result = cli(env, "outputs", "--env", name)
    assert result.returncode == 0, result.stdout + result.stderr
    for stack in STACKS:
        assert f"{name}/{stack} [local cloud]: not deployed" in result.stdout, result.stdout
    as_json = cli(env, "outputs", "--env", name, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {stack: {} for stack in STACKS}


def test_cloud_knobs_are_shown_set_and_cleared_for_every_plugin(
    env: dict[str, str], local_cloud: Any
) -> None:
    """`cloud knobs` on the session's local cloud: --set replaces them (what every plugin process
    then sees), a bad spec is refused naming what is accepted and changes nothing, --clear
    empties them."""
    from stackflow.localcloud.knobs import clear_knobs, get_knobs

    name = unique("dev")
    spec = {
        "latency_s": {"database": 0.5},
        "faults": [{"kind": "transient", "count": 2, "environment": name}],
    }
    try:
        done = cli(env, "cloud", "knobs", "--set", json.dumps(spec))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "latency database: 0.5 s per resource operation" in done.stdout
        assert f"fault transient: 2 call(s) left (environment={name})" in done.stdout
        assert get_knobs(local_cloud.url).faults[0].environment == name

        bad = cli(env, "cloud", "knobs", "--set", '{"faults": [{"kind": "flaky"}]}')
        assert bad.returncode == 1 and "faults.0.kind" in bad.stderr, bad.stderr
        assert "transient|permanent|hang" in bad.stderr and "Traceback" not in bad.stderr
        shown = cli(env, "cloud", "knobs", "--json")
        assert json.loads(shown.stdout)["knobs"] == spec  # the refused spec changed nothing

        misplaced = cli(env, "cloud", "status", "--clear")
        assert misplaced.returncode == 2 and "cloud knobs" in misplaced.stderr

        cleared = cli(env, "cloud", "knobs", "--clear")
        assert cleared.returncode == 0 and "0 latency knob(s), 0 fault(s)" in cleared.stdout
        assert get_knobs(local_cloud.url).faults == []
    finally:
        clear_knobs(local_cloud.url)


def test_graph_prints_every_node_and_edge_as_mermaid(env: dict[str, str]) -> None:
    result = cli(env, "graph")
    assert result.returncode == 0
    assert result.stdout.startswith("flowchart LR")
    for edge in ("networking --> database", "database --> migrate", "migrate --> app"):
        assert edge in result.stdout


def test_help_does_not_import_prefect() -> None:
    """`--help` must answer without the ~1.5 s `import prefect` (measured in bench, not here)."""
    code = (
        "import sys, contextlib, io\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from cli.main import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    main(['--help'])\n"
        "assert 'usage:' in out.getvalue(), out.getvalue()\n"
        "print(sorted(m for m in sys.modules if m == 'prefect' or m.startswith('pulumi')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_a_failed_run_shows_what_happened_then_the_reason_last(
    env: dict[str, str], local_cloud: Any
) -> None:
    """AWS refusing the database's subnet group (a permanent fault from the local cloud's knobs):
    exit 1, the summary table says which stacks ran, failed and did not run, and the reason, with
    AWS's error code in pulumi-aws's words, is the very last line. The app, which starts beside
    the database, stopped where it needed it (or had not begun: the database fails at once)."""
    from stackflow.localcloud.knobs import clear_knobs, set_knobs

    name = unique("dev")
    fault = {
        "kind": "permanent",
        "code": "DBSubnetGroupQuotaExceeded",
        "message": "the local cloud's knob refused this subnet group",
        "environment": name,
        "type": "aws:rds/subnetGroup:SubnetGroup",
    }
    set_knobs(local_cloud.url, {"faults": [fault]})
    try:
        result = subprocess.run(
            [sys.executable, str(ROOT / "flows" / "run.py"), "up", "--env", name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, as a terminal shows it
            text=True,
            timeout=600,
        )
    finally:
        clear_knobs(local_cloud.url)
    assert result.returncode == 1, result.stdout
    # the reason (which may quote several lines of the engine's output) comes after the table
    reason = result.stdout[result.stdout.rindex("\nerror: stack '") + 1 :]
    assert reason.startswith(f"error: stack '{name}/database'"), reason
    assert "api error DBSubnetGroupQuotaExceeded" in reason, reason
    assert "stack       status" not in reason and "Traceback" not in reason
    table = result.stdout[result.stdout.rindex("stack       status") :]
    assert re.search(r"^networking\s+updated", table, re.M), table
    assert re.search(r"^database\s+failed", table, re.M), table
    assert re.search(
        r"^app\s+(not run\s+.*an upstream node did not complete|stopped\s+.*database did not complete)",
        table,
        re.M,
    ), table


def test_a_second_port_never_stops_the_server_another_run_may_use(tmp_path: Path) -> None:
    """One state folder, one Prefect database, one server: `server start` on another port is
    refused, naming the port the folder's server runs on, and that server keeps running (a run
    using it would otherwise die under it); `server stop` then stops it."""
    from stackflow.localprefect import healthy
    from stackflow.processes import free_port

    ports = [free_port(), free_port()]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PREFECT_"))}
    env |= {"STACKFLOW_STATE_DIR": str(tmp_path / "state")}

    def server(action: str, port: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "flows" / "run.py"), "server", action],
            env=env | {"STACKFLOW_LOCAL_PREFECT_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=120,
        )

    try:
        started = server("start", ports[0])
        assert started.returncode == 0, started.stdout + started.stderr
        assert healthy(f"http://127.0.0.1:{ports[0]}")
        refused = server("start", ports[1])
        assert refused.returncode != 0
        assert f"runs on http://127.0.0.1:{ports[0]}" in refused.stderr
        assert f"STACKFLOW_LOCAL_PREFECT_PORT={ports[0]}" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert healthy(f"http://127.0.0.1:{ports[0]}")  # still serving its runs
        assert not healthy(f"http://127.0.0.1:{ports[1]}")
    finally:
        stopped = server("stop", ports[0])
    assert "Prefect: stopped" in stopped.stdout
    assert not healthy(f"http://127.0.0.1:{ports[0]}")
