"""Adding a stack and a step, exactly as the guide docs/guides/adding-a-stack.md says, on
the real Pulumi engine (the CLI and the Automation API) and the session's **local cloud** (moto on
loopback behind the project's own provider plugins, not AWS).

The project's code is copied into a folder of its own, its graph/nodes.py the template's as it
ships (the fixture project's nodes.py: a team's own graph never decides whether the guide still
works), and committed there as a git repository; the test then adds a fourth stack (`audit`: a
CloudWatch log group, a type the local cloud serves) in one new program module and one
`stack(...)` entry whose output reaches the app through the app program's generic input
(`container_env`), and a custom step (`smoke`: checks the log group's ARN, read by type from its
upstream outputs) in one new task module and one `step(...)` entry. The copy's own command line (`python flows/run.py`) then deploys, previews (0 changes),
shows the graph and destroys one environment of the test's own; Pulumi's update history gives the
deploy and destroy order, the local cloud's ECS the app's task definition. `git status` in the
copy proves that only the two new modules and graph/nodes.py changed: no flow, no other task, no
engine or command line module. The guide's code blocks are checked to be what the test wrote.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.realenv import (
    ROOT,
    TEMPLATE,
    process_env,
    project_file,
    real_variables,
    unique,
    update_history,
)

pytestmark = pytest.mark.integration

COPIED = (
    "flows",
    "tasks",
    "graph",
    "stackflow",
    "programs",
    "cli",
    "deployments",
    "migrations",
    "environments",
    "stackflow.toml",
)
GUIDE = ROOT / "docs" / "guides" / "adding-a-stack.md"
STACKS = ("networking", "database", "audit", "app")

# The new stack: one program module.
PROGRAM_PATH = "programs/audit.py"
PROGRAM = '''"""The audit stack: a CloudWatch log group the app writes its audit trail to."""

from __future__ import annotations

from typing import Any

import pulumi_aws as aws
from pydantic import BaseModel, Field

from programs.common import BaseArgs, tags


class AuditArgs(BaseArgs, frozen=True):
    """What the audit program needs."""

    retention_days: int = Field(ge=1)


class AuditOutputs(BaseModel):
    """The audit stack's exports, resolved (one field per export)."""

    log_group_name: str
    log_group_arn: str


def audit(args: AuditArgs) -> dict[str, Any]:
    """Declare the log group; return the exports."""
    group = aws.cloudwatch.LogGroup(
        "audit",
        name=f"/{args.project}/{args.environment}/audit",
        retention_in_days=args.retention_days,
        tags=tags(args.project, args.environment, "audit"),
    )
    return {"log_group_name": group.name, "log_group_arn": group.arn}
'''

# The custom step: one task module.
TASK_PATH = "tasks/smoke.py"
TASK = '''"""The smoke step: the audit log group's ARN names the group, in this run's region."""

from __future__ import annotations

import time

from prefect import task
from prefect.cache_policies import NO_CACHE

from programs.audit import AuditOutputs
from stackflow.engine import Operation
from stackflow.errors import StackError
from stackflow.outcome import NodeOutcome, Status
from stackflow.plan import DeployPlan
from stackflow.progress import NodeState
from tasks.context import RunContext


@task(name="smoke", task_run_name="smoke-{node}", cache_policy=NO_CACHE, persist_result=False)
def smoke_step(
    ctx: RunContext,
    node: str,
    upstream: dict[str, NodeOutcome],
    plan: DeployPlan | None = None,
) -> NodeOutcome:
    """Check the audit stack's outputs (found by type, not by node name)."""
    ctx.check_not_cancelled(node)
    started = time.monotonic()
    found = [o.typed for o in upstream.values() if isinstance(o.typed, AuditOutputs)]
    if not found:
        raise StackError(node, "no upstream stack has an audit log group's outputs")
    name, arn = found[0].log_group_name, found[0].log_group_arn
    region = ctx.settings.aws.region
    if not (arn.startswith(f"arn:aws:logs:{region}:") and arn.endswith(f":log-group:{name}")):
        raise StackError(node, f"{arn} is not the ARN of log group {name} in {region}")
    note = f"{name} is {arn}"
    ctx.publish(node, NodeState.DONE, status=Status.CHECKED, detail=note)
    took = time.monotonic() - started
    return NodeOutcome(node, Operation.UP, Status.CHECKED, duration_s=took, note=note)
'''

# graph/nodes.py: (what is there, what it becomes), each anchor found exactly once.
STACK_ENTRY = """    stack(
        "audit",
        "CloudWatch log group for the app's audit trail",
        program=audit,
        inputs=lambda settings, _: AuditArgs(
            project=settings.project,
            environment=settings.environment,
            retention_days=settings.app.log_retention_days,
        ),
        outputs=AuditOutputs,
    ),
"""
STEP_ENTRY = """    step("smoke", "check the audit log group's ARN", task=smoke_step, upstream=("audit",)),
"""
NODE_EDITS = (
    (  # the new modules' imports
        "from programs.app import AppArgs, AppOutputs, app\n",
        "from programs.app import AppArgs, AppOutputs, app\n"
        "from programs.audit import AuditArgs, AuditOutputs, audit\n",
    ),
    (
        "from tasks.migrate import check_migration_files, migrate_step, migration_plan\n",
        "from tasks.migrate import check_migration_files, migrate_step, migration_plan\n"
        "from tasks.smoke import smoke_step\n",
    ),
    (  # the app's inputs builder hands the new stack's output to the container
        '    db = typing.cast(DatabaseOutputs, up["database"])\n',
        '    db = typing.cast(DatabaseOutputs, up["database"])\n'
        '    audit = typing.cast(AuditOutputs, up["audit"])\n',
    ),
    (
        "        container_env={},\n",
        '        container_env={"AUDIT_LOG_GROUP": audit.log_group_name},\n',
    ),
    (  # the stack's entry, declared before the app that reads it
        '    stack(\n        "app",\n',
        STACK_ENTRY + '    stack(\n        "app",\n',
    ),
    (
        '        upstream=("networking", "database", "migrate"),\n',
        '        upstream=("networking", "database", "migrate", "audit"),\n',
    ),
    (  # the step's entry
        '    step("verify", "poll the app\'s health URL", task=verify_step, upstream=("app",)),\n',
        '    step("verify", "poll the app\'s health URL", task=verify_step, upstream=("app",)),\n'
        + STEP_ENTRY,
    ),
)


def extended_nodes(text: str) -> str:
    """graph/nodes.py with the guide's edits made."""
    for old, new in NODE_EDITS:
        assert text.count(old) == 1, f"graph/nodes.py no longer holds exactly one {old!r}"
        text = text.replace(old, new)
    return text


def git(copy: Path, *args: str) -> str:
    """git in the copy, with no user or system configuration of this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-c", "user.name=stackflow-test", "-c", "user.email=test@example.invalid", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def changed(copy: Path) -> list[str]:
    """`git status` of the copy: one 'XY path' line per changed or new file."""
    return sorted(git(copy, "status", "--porcelain", "--untracked-files=all").splitlines())


def guide() -> str:
    """The guide a user follows: its page in the docs."""
    assert GUIDE.is_file(), f"the guide {GUIDE} is missing"
    return GUIDE.read_text()


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's code in a git repository of its own (committed), the template's graph as it
    ships, then extended as the guide says: the two new modules written, graph/nodes.py edited."""
    copy = tmp_path_factory.mktemp("extended") / "project"
    copy.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copy / name)
    shutil.copy2(TEMPLATE / "nodes.py", copy / "graph" / "nodes.py")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "the project as it is")
    (copy / PROGRAM_PATH).write_text(PROGRAM)
    (copy / TASK_PATH).write_text(TASK)
    nodes = copy / "graph" / "nodes.py"
    nodes.write_text(extended_nodes(nodes.read_text()))
    return copy


def test_the_readme_guide_is_what_this_test_does(copy: Path) -> None:
    """Every code line the guide shows is in the files the test wrote, in the same order (`...`
    stands for lines left out), and the guide names exactly the files that changed."""
    text = guide()
    files = {p: (copy / p).read_text() for p in (PROGRAM_PATH, TASK_PATH, "graph/nodes.py")}
    blocks = code_blocks(text, "python")
    assert len(blocks) >= 4, "the guide shows the program, the task and both entries"
    for block in blocks:
        chunks = [c.strip("\n") for c in re.split(r"^\s*\.\.\.\n", block, flags=re.MULTILINE)]
        home = [p for p, body in files.items() if all(c in body for c in chunks)]
        assert home, f"the guide shows code the test did not write:\n{block}"
        body, at = files[home[0]], 0
        for chunk in chunks:
            at = body.index(chunk, at) + len(chunk)
    whole = [b.strip("\n") for b in blocks]
    assert files[PROGRAM_PATH].strip("\n") in whole  # the new modules, whole
    assert files[TASK_PATH].strip("\n") in whole
    for path in files:
        assert f"`{path}`" in text


@pytest.mark.timeout(1200)
def test_a_stack_and_a_step_added_by_three_files_deploy_preview_show_and_destroy_in_order(
    copy: Path, tmp_path: Path, local_cloud: Any, prefect_server: Any
) -> None:
    """Local cloud, real engine, the copy's own CLI: `graph` shows the new nodes; `up` deploys the
    audit log group before the app and runs the smoke step; the app's task definition carries
    the log group's name; `preview` then changes nothing; `destroy` takes the app down before the
    audit stack and leaves nothing in the local cloud; only the three files changed."""
    assert changed(copy) == [
        " M graph/nodes.py",
        f"?? {PROGRAM_PATH}",
        f"?? {TASK_PATH}",
    ]
    assert git(copy, "diff", "--name-only").split() == ["graph/nodes.py"]

    variables = real_variables(tmp_path / "state", local_cloud, prefect_server)
    # the run's project names the copy's graph (graph/nodes.py, on the copy's PYTHONPATH)
    project = Path(variables["STACKFLOW_PROJECT_DIR"])
    (project / "stackflow.toml").write_text(project_file("graph.nodes"))
    env = process_env(variables, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    name = unique("dev")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, str(copy / "flows" / "run.py"), *args],
            env=env,
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def summary(*args: str) -> dict[str, dict[str, Any]]:
        return {s["stack"]: s for s in json.loads(run(*args, "--json").stdout)["stacks"]}

    # The graph, as the copy declares it: the guide's picture, and the new nodes as data.
    drawn = run("graph").stdout.strip()
    assert drawn == code_blocks(guide(), "mermaid")[0].strip()
    nodes = {n["name"]: n for n in json.loads(run("graph", "--json").stdout)["nodes"]}
    assert list(nodes) == ["networking", "database", "migrate", "audit", "app", "verify", "smoke"]
    assert (nodes["audit"]["kind"], nodes["audit"]["upstream"]) == ("stack", [])
    assert (nodes["smoke"]["kind"], nodes["smoke"]["upstream"]) == ("step", ["audit"])
    assert "audit" in nodes["app"]["upstream"]

    # up: four stacks, the two steps of old and the new one.
    up = summary("up", "--env", name)
    assert {n: s["status"] for n, s in up.items()} == {
        "networking": "updated",
        "database": "updated",
        "migrate": "migrated",
        "audit": "updated",
        "app": "updated",
        "verify": "healthy",
        "smoke": "checked",
    }
    shown = json.loads(run("outputs", "--env", name, "--json").stdout)
    group = shown["audit"]["log_group_name"]
    assert group == f"/stackflow/{name}/audit"
    assert up["smoke"]["note"] == f"{group} is {shown['audit']['log_group_arn']}"
    spans = {s: _spans(variables, name, s, "update") for s in STACKS}
    assert all(len(v) == 1 for v in spans.values()), spans
    assert spans["networking"][0][1] <= spans["database"][0][0]
    # the app starts beside the database (graph: early), never before a stack it may not
    assert spans["database"][0][1] <= spans["app"][0][1]
    assert spans["audit"][0][1] <= spans["app"][0][0]

    # The new stack's output reached the app's container, through the generic input alone.
    ecs, logs = local_cloud.client("ecs"), local_cloud.client("logs")
    task = ecs.describe_task_definition(taskDefinition=f"stackflow-{name}-app")["taskDefinition"]
    environment = {e["name"]: e["value"] for e in task["containerDefinitions"][0]["environment"]}
    assert environment["AUDIT_LOG_GROUP"] == group
    assert environment["DB_HOST"] == shown["database"]["host"]
    [made] = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    assert made["retentionInDays"] > 0

    # preview: nothing to change in any stack; steps do not run.
    preview = summary("preview", "--env", name)
    assert list(preview) == list(STACKS)
    for stack, row in preview.items():
        assert row["status"] == "previewed", (stack, row)
        changes = {k: v for k, v in row["changes"].items() if k != "same"}
        assert set(changes.values()) == {0}, (stack, row["changes"])

    # destroy: in reverse order, the app before the stacks it reads.
    gone = summary("destroy", "--env", name, "--yes")
    assert {n: s["status"] for n, s in gone.items()} == {s: "destroyed" for s in STACKS}
    ends = {s: _spans(variables, name, s, "destroy") for s in STACKS}
    assert all(len(v) == 1 for v in ends.values()), ends
    assert ends["app"][0][1] <= ends["audit"][0][0]
    assert ends["app"][0][1] <= ends["database"][0][0]
    assert ends["database"][0][1] <= ends["networking"][0][0]
    assert logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"] == []
    assert json.loads(run("cloud", "ls", "--env", name, "--json").stdout)["resources"] == []

    # Running it all wrote nothing into the code: still the three files, and only those.
    assert changed(copy) == [
        " M graph/nodes.py",
        f"?? {PROGRAM_PATH}",
        f"?? {TASK_PATH}",
    ]


def _spans(variables: dict[str, str], environment: str, stack: str, kind: str) -> list[Any]:
    """(start, end) of each finished `kind` operation of a stack, from Pulumi's own history."""
    state = Path(variables["STACKFLOW_STATE_DIR"])
    return [
        (r["startTime"], r["endTime"])
        for r in update_history(state, environment, stack)
        if r["kind"] == kind
    ]
