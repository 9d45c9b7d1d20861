"""What every test of the real engine shares: settings that point the CLI and the flows at the
session's **local cloud** (moto on loopback, not AWS) and Prefect server, environment names of a
test's own, the CLI as a user runs it, and readers of what a run left behind (the summary table,
outputs, Pulumi's own update history).

A test gets a state folder of its own and environment names of its own; the CLI build, the local
cloud and the Prefect server are the session's (see tests/fixtures/).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.fixtures.template import TEMPLATE

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = ROOT / "flows" / "run.py"
STACKS = ("networking", "database", "app")


def git(cwd: Path, *args: str, given: str | None = None) -> str:
    """A git command run as a test's user (a fixed author, no config of this machine's); its
    output. Fails the test, quoting git, when git fails."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=given,
        check=False,
        env={
            "GIT_AUTHOR_NAME": "test",
            "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "test",
            "GIT_COMMITTER_EMAIL": "test@example.invalid",
            "HOME": str(cwd),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def unique(prefix: str) -> str:
    """An environment name of this test's own (<= 20 characters, DNS-safe), e.g. dev-1a2b3c.

    The prefix sets the kind: dev-*, staging-*, prod-*, pr-* (ephemeral)."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


KINDS = ("dev", "staging", "prod", "ephemeral")


def project_file(graph: str = "nodes") -> str:
    """The fixture project's stackflow.toml, naming `graph` as its graph's module (default: the
    fixture graph, nodes.py beside the file)."""
    import tomllib

    values = tomllib.loads((TEMPLATE / "stackflow.toml").read_text()) | {"graph": graph}
    return "".join(f"{key} = {_toml(value)}\n" for key, value in values.items())


def test_project(folder: Path) -> Path:
    """A project folder for a test's runs, made like the fixture project: its stackflow.toml and
    graph (a copy of nodes.py), the repository's migrations, and a template per kind that says
    only the kind (so any test name, dev-1a2b3c or prod-1a2b3c, deploys the kind's defaults).
    `declare` adds an environment's own file."""
    project = folder
    templates = project / "environments" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        (templates / f"{kind}.toml").write_text(f'kind = "{kind}"\ncloud = "local"\n')
    (project / "stackflow.toml").write_text(project_file())
    shutil.copy2(TEMPLATE / "nodes.py", project / "nodes.py")
    if not (project / "migrations").exists():
        (project / "migrations").symlink_to(ROOT / "migrations")
    return project


def declare(variables: dict[str, str], environment: str, **sections: Any) -> Path:
    """Write environments/<environment>.toml in the run's project: its kind (from the name) and
    these settings, top-level keys as values and sections as dicts, e.g.
    `declare(v, "dev-1a2b3c", app={"desired_count": 2})`. Returns the file (rewritten each call)."""
    from stackflow.settings import kind_of

    project = Path(variables["STACKFLOW_PROJECT_DIR"])
    top = {"kind": kind_of(environment).value, "cloud": "local"}
    lines = []
    tables = {k: v for k, v in sections.items() if isinstance(v, dict)}
    top.update({k: v for k, v in sections.items() if not isinstance(v, dict)})
    lines += [f"{k} = {_toml(v)}" for k, v in top.items()]
    for table, values in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
    path = project / "environments" / f"{environment}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


def real_variables(state_dir: Path, local_cloud: Any, prefect_server: Any) -> dict[str, str]:
    """STACKFLOW_* settings for the real engine on the session's local cloud, state in `state_dir`,
    a project folder beside it (see `test_project`), no retry delays. Prefect's address is the
    session server's."""
    from stackflow.pulumi_cli import cache_root

    project = test_project(state_dir.parent / f"{state_dir.name}-project")
    return {
        "STACKFLOW_CACHE_DIR": str(cache_root()),  # the CLI setup.sh built, found by path
        "STACKFLOW_PROJECT_DIR": str(project),
        "STACKFLOW_STATE_DIR": str(state_dir),
        "STACKFLOW_LOCALCLOUD_DIR": str(local_cloud.root),
        "STACKFLOW_LOCALCLOUD_PORT": str(local_cloud.port),
        "STACKFLOW_RETRY_DELAY_S": "0",
        "STACKFLOW_MIGRATIONS_WAIT_TIMEOUT_S": "30",
        "PREFECT_API_URL": prefect_server.api_url,
    }


def process_env(variables: dict[str, str], **extra: str) -> dict[str, str]:
    """This process's environment without STACKFLOW_*, PULUMI_* or AWS_* variables, plus these."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PULUMI_", "AWS_"))
    }
    env.update(variables)
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cli(
    env: dict[str, str], *args: str, timeout: float = 600, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """`python flows/run.py ...` as a user runs it, with these settings, to the end."""
    return subprocess.run(
        [sys.executable, str(RUN_PY), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def summary_of(result: subprocess.CompletedProcess[str] | str) -> dict[str, str]:
    """stack -> status, from the CLI's summary table."""
    text = result if isinstance(result, str) else result.stdout
    statuses: dict[str, str] = {}
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stack "))
    for line in lines[start + 2 :]:
        parts = line.split()
        if len(parts) >= 2 and parts[0] in (*STACKS, "migrate", "verify"):
            statuses[parts[0]] = parts[1]
    return statuses


def settings_for(variables: dict[str, str], environment: str, cloud: str | None = None) -> Any:
    """The Settings a run with `variables` reads, for `environment`."""
    from stackflow.settings import get_settings

    machine = {k: v for k, v in variables.items() if k.startswith("STACKFLOW_")}
    return get_settings(environment, cloud, environ=machine)


def outputs(variables: dict[str, str], environment: str) -> dict[str, dict[str, Any]]:
    """Every stack's outputs (plain values, secrets included) from the real backend, for the
    stacks of the graph the run's project names."""
    from stackflow.dag import bare_spec
    from stackflow.engine import get_engine
    from stackflow.graphs import project_graph

    settings = settings_for(variables, environment)
    engine = get_engine(settings)
    return {
        n: {k: v.value for k, v in engine.outputs(bare_spec(settings, n)).items()}
        for n in project_graph(Path(variables["STACKFLOW_PROJECT_DIR"])).stacks
    }


def update_history(state_dir: Path, environment: str, stack: str) -> list[dict[str, Any]]:
    """Pulumi's own record of every finished update of one stack (kind, result, start and end in
    epoch seconds, resource changes), oldest first, read from the file backend's history files."""
    folder = state_dir / "pulumi-local" / ".pulumi" / "history" / f"stackflow-{stack}"
    found = []
    for path in sorted(folder.glob(f"{environment}/*.history.json")):
        record = json.loads(path.read_text())
        found.append(record)
    return sorted(found, key=lambda r: r["startTime"])


def intervals(state_dir: Path, environment: str, stack: str) -> list[tuple[int, int]]:
    """(start, end) of each finished update, refresh or destroy of a stack, from Pulumi's history."""
    return [(r["startTime"], r["endTime"]) for r in update_history(state_dir, environment, stack)]


def deploy_answering(environment: str, approve: bool, reason: str) -> Any:
    """`up` of networking in a thread of this process (this machine's variables must be set in
    it), each plan it asks approval for answered from another thread as the UI's form would:
    approved or rejected with `reason`. The flow's final state."""
    import contextvars
    import threading

    from flows.approval import answer
    from flows.pipeline import deploy
    from stackflow.progress import ApprovalRequested, hub

    result: dict[str, Any] = {}

    def seen(event: Any) -> None:
        if isinstance(event, ApprovalRequested):
            threading.Thread(
                # in this context: Prefect's settings (the session's server) live there
                target=contextvars.copy_context().run,
                args=(answer, event.flow_run_id, approve, reason),
                daemon=True,
            ).start()

    def run() -> None:
        result["state"] = deploy(environment=environment, stacks=["networking"], return_state=True)

    with hub().subscribed(seen):
        worker = threading.Thread(target=contextvars.copy_context().run, args=(run,))
        worker.start()
        worker.join(timeout=600)
    assert "state" in result, "the deploy flow did not end"
    return result["state"]
