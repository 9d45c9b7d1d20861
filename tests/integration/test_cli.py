"""`python flows/run.py` as users run it: a subprocess against the session's real Prefect server,
on the simulated engine (the Pulumi engine cannot run here) bound to a real MariaDB schema."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
STACKS = ("networking", "database", "app")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI with this process's environment (PREFECT_API_URL and STACKFLOW_* included)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "flows" / "run.py"), *args],
        env=dict(os.environ),
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_up_prints_a_simulated_summary_and_outputs_json_masks_the_password(
    pipeline_env: dict[str, Any], tmp_path: Path
) -> None:
    up = cli("up", "--env", "dev", cwd=tmp_path)  # any working folder will do
    assert up.returncode == 0, up.stdout + up.stderr
    assert "[simulated: nothing was deployed to AWS]" in up.stdout
    table = up.stdout[up.stdout.index("stack ") :]
    for stack in (*STACKS, "migrate", "verify"):
        assert f"\n{stack} " in table
    assert "engine operations: 3" in up.stdout

    out = cli("outputs", "--env", "dev", "--json")
    assert out.returncode == 0, out.stderr
    outputs = json.loads(out.stdout)  # stdout is JSON and nothing else
    assert sorted(outputs) == sorted(STACKS)
    assert outputs["database"]["password"] == "[secret]"
    assert outputs["database"]["port"] == pipeline_env["db"].port
    assert outputs["networking"]["vpc_id"].startswith("vpc-")
    assert "simulated" in out.stderr
    password = pipeline_env["db"].password.get_secret_value()
    for text in (up.stdout, up.stderr, out.stdout, out.stderr):
        assert password not in text


def test_up_publishes_the_summary_artifact_with_secrets_masked(
    pipeline_env: dict[str, Any],
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.pipeline import deploy

    deploy(environment="dev")
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["up-dev"]))
        )
    assert artifacts, "no up-dev artifact"
    latest = max(artifacts, key=lambda a: a.created or 0)
    markdown = str(latest.data)
    assert "simulated" in markdown.lower()
    for stack in STACKS:
        assert stack in markdown
    assert "[secret]" in markdown  # the password output is listed, masked
    assert pipeline_env["db"].password.get_secret_value() not in markdown


def test_outputs_of_an_environment_never_deployed_says_so(pipeline_env: dict[str, Any]) -> None:
    result = cli("outputs", "--env", "pr-9")
    assert result.returncode == 0, result.stderr
    for stack in STACKS:
        assert f"pr-9/{stack} [simulated]: not deployed" in result.stdout


def test_graph_prints_every_node_and_edge_as_mermaid() -> None:
    result = cli("graph")
    assert result.returncode == 0
    assert result.stdout.startswith("flowchart LR")
    for edge in ("networking --> database", "database --> migrate", "migrate --> app"):
        assert edge in result.stdout


def test_help_does_not_import_prefect() -> None:
    """`--help` must answer without the ~1.5 s `import prefect` (measured in bench, not here)."""
    code = (
        "import sys, contextlib, io\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from flows import run\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    run.main(['--help'])\n"
        "assert 'usage:' in out.getvalue(), out.getvalue()\n"
        "print(sorted(m for m in sys.modules if m == 'prefect' or m.startswith('pulumi')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_a_failed_run_shows_what_happened_then_the_reason_last_simulated(
    pipeline_env: dict[str, Any],
) -> None:
    """A permanent fault injected into the simulated database stack: exit 1, the summary table
    says which stacks ran, failed and did not run, and the reason is the very last line."""
    from stackflow.engine.simulated import inject_fault

    inject_fault(pipeline_env["state_dir"], "database", permanent=True)
    result = subprocess.run(
        [sys.executable, str(ROOT / "flows" / "run.py"), "up", "--env", "dev"],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, as a terminal shows it
        text=True,
        timeout=240,
    )
    assert result.returncode == 1, result.stdout
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[-1].startswith("error: stack 'dev/database'"), lines[-5:]
    assert "injected permanent fault" in lines[-1]
    table = result.stdout[result.stdout.rindex("stack       status") :]
    assert re.search(r"^networking\s+updated", table, re.M), table
    assert re.search(r"^database\s+failed", table, re.M), table
    assert re.search(r"^app\s+not run", table, re.M), table


def test_moving_the_local_server_to_another_port_stops_the_old_one(tmp_path: Path) -> None:
    """One state folder, one Prefect database, one server: `server start` on a new port stops the
    server the folder recorded on the old port instead of orphaning it."""
    from stackflow.localprefect import free_port, healthy

    ports = [free_port(), free_port()]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PREFECT_"))}
    env |= {"STACKFLOW_STATE_DIR": str(tmp_path / "state"), "STACKFLOW_SIM_MYSQL": "off"}

    def server(action: str, port: int) -> str:
        result = subprocess.run(
            [sys.executable, str(ROOT / "flows" / "run.py"), "server", action],
            env=env | {"STACKFLOW_LOCAL_PREFECT_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    try:
        server("start", ports[0])
        assert healthy(f"http://127.0.0.1:{ports[0]}")
        moved = server("start", ports[1])
        assert f"moving to http://127.0.0.1:{ports[1]}" in moved
        assert healthy(f"http://127.0.0.1:{ports[1]}")
        assert not healthy(f"http://127.0.0.1:{ports[0]}")
    finally:
        stopped = server("stop", ports[1])
    assert "Prefect: stopped" in stopped
    assert not healthy(f"http://127.0.0.1:{ports[1]}")
