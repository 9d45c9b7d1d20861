"""The template's tests survive its users: a team that does what the template is for, in a shell of
its own, still gets a green unit tier.

The project is copied (every file git would commit), its graph, project file and environment
files reset to the template's as it ships (the fixture project, tests/fixtures/template/), then
edited as a team does: a stack and a step added as docs/guides/adding-a-stack.md says (the audit
log group and the smoke step, the app reading the new stack's output), a project node as
docs/guides/project-nodes.md declares it (its folder beside graph/nodes.py), and dev given three
AZs, two tasks and another CIDR. The copy's own unit tier (`pytest -m unit`, a process of its own)
then runs in a hostile shell: every STACKFLOW_*, PREFECT_* and PULUMI_* variable a team member's
shell might hold set to a value that would change a result (a PostgreSQL backend that does not
answer, another project whose files are invalid, the AWS cloud, a retry count that is no number,
a Prefect server that is not there, a Pulumi home and backend elsewhere), and a `.env` in the
folder it runs from. It must pass whole; the tests derived from the committed files
(tests/unit/test_committed.py) must have run for the new nodes; nothing may have been written
where the shell's variables point. Nothing here starts a server or deploys: the unit tier runs
programs under Pulumi's mock runtime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.integration.test_extension import (
    PROGRAM,
    PROGRAM_PATH,
    TASK,
    TASK_PATH,
    code_blocks,
    extended_nodes,
)
from tests.integration.test_gitops import project_files
from tests.realenv import ROOT, TEMPLATE, project_file

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PROJECT_GUIDE = ROOT / "docs" / "guides" / "project-nodes.md"
SITE = ROOT / "tests" / "fixtures" / "projects" / "site"  # the guide's site project
SITE_OUTPUTS = '''

class SiteOutputs(BaseModel):
    """The site project's exports."""

    bucket: str
    greeting: str
'''
DEV_EDITS = (  # environments/dev.toml: (what is there, what it becomes)
    ('vpc_cidr = "10.0.0.0/16"\n', 'vpc_cidr = "10.42.0.0/16"\n'),
    ("az_count = 2\n", "az_count = 3\n"),
    ("memory_mb = 512\n", "memory_mb = 512\ndesired_count = 2\n"),
)


def replace_once(text: str, old: str, new: str, where: str) -> str:
    assert text.count(old) == 1, f"{where} no longer holds exactly one {old!r}"
    return text.replace(old, new)


def with_project_node(nodes: str) -> str:
    """graph/nodes.py with the project-nodes guide's declaration as an entry of its graph (its
    import, its outputs model, and the `project(...)` call before the last step)."""
    block = code_blocks(PROJECT_GUIDE.read_text(), "python")[0]
    head, _, call = block.partition("\n\n")
    assert head == "from graph.kinds import project", block
    entry = textwrap.indent(call.rstrip("\n"), "    ") + ",\n"
    where = "graph/nodes.py"
    nodes = replace_once(
        nodes,
        "from graph.kinds import stack, step\n",
        "from graph.kinds import project, stack, step\n",
        where,
    )
    nodes = replace_once(
        nodes,
        "from typing import Any\n",
        "from typing import Any\n\nfrom pydantic import BaseModel\n",
        where,
    )
    nodes = replace_once(nodes, "\n\nNODES = [\n", SITE_OUTPUTS + "\n\nNODES = [\n", where)
    last_step = '    step("verify",'
    return replace_once(nodes, last_step, entry + last_step, where)


def team_copy(folder: Path) -> Path:
    """The project as a team has it after following the guides and editing dev (see the module)."""
    copy = folder / "team"
    for name in project_files():
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    # the template as it ships, whatever this checkout's team has made of its own files
    shutil.copy2(TEMPLATE / "nodes.py", copy / "graph" / "nodes.py")
    shutil.rmtree(copy / "environments")
    shutil.copytree(TEMPLATE / "environments", copy / "environments")
    (copy / "stackflow.toml").write_text(project_file("graph.nodes"))
    # a stack and a step (adding-a-stack.md), then a project node (project-nodes.md)
    (copy / PROGRAM_PATH).write_text(PROGRAM)
    (copy / TASK_PATH).write_text(TASK)
    nodes = copy / "graph" / "nodes.py"
    nodes.write_text(with_project_node(extended_nodes(nodes.read_text())))
    shutil.copytree(
        SITE, copy / "graph" / "projects" / "site", ignore=shutil.ignore_patterns("__pycache__")
    )
    # three AZs, two tasks, another CIDR
    dev = copy / "environments" / "dev.toml"
    text = dev.read_text()
    for old, new in DEV_EDITS:
        text = replace_once(text, old, new, "environments/dev.toml")
    dev.write_text(text)
    return copy


def hostile_shell(folder: Path) -> dict[str, str]:
    """A team member's shell: this one's variables without STACKFLOW_*, PREFECT_* or PULUMI_*
    ones, then each of those set to something that would change a result."""
    other = folder / "other-project"
    (other / "environments").mkdir(parents=True)
    (other / "stackflow.toml").write_text('project = "other"\ngraph = "no.such.module"\n')
    (other / "environments" / "dev.toml").write_text('kind = "prod"\n[network]\naz_count = 1\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STACKFLOW_", "PREFECT_", "PULUMI_", "PYTEST_")) and k != "PYTHONPATH"
    }
    return env | {
        "STACKFLOW_BACKEND_URL": "postgres://member:pw@127.0.0.1:9/pulumi",
        "STACKFLOW_RECORDS_URL": "postgres://member:pw@127.0.0.1:9/stackflow",
        "STACKFLOW_PROJECT_DIR": str(other),
        "STACKFLOW_STATE_DIR": str(folder / "member-state"),
        "STACKFLOW_CACHE_DIR": str(folder / "member-cache"),
        "STACKFLOW_STATE_PASSPHRASE": "member",
        "STACKFLOW_STACK_RETRIES": "many",
        "STACKFLOW_LOCAL_PREFECT_PORT": "1",
        "STACKFLOW_CLOUD": "aws",
        "PREFECT_API_URL": "http://127.0.0.1:9/api",
        "PREFECT_API_KEY": "member",
        "PULUMI_BACKEND_URL": f"file://{folder / 'member-backend'}",
        "PULUMI_CONFIG_PASSPHRASE": "member",
        "PULUMI_ACCESS_TOKEN": "member",
        "PULUMI_HOME": str(folder / "member-pulumi"),
    }


def test_the_unit_tier_passes_in_a_copy_a_team_has_extended_run_from_a_hostile_shell(
    tmp_path: Path,
) -> None:
    copy = team_copy(tmp_path)
    (copy / ".env").write_text(
        "STACKFLOW_BACKEND_URL=postgres://dotenv:pw@127.0.0.1:9/pulumi\n"
        "STACKFLOW_STACK_RETRIES=many\nSTACKFLOW_CLOUD=aws\n"
    )
    report = tmp_path / "unit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "unit", "-n", "0", "-q", f"--junitxml={report}"],
        cwd=copy,
        env=hostile_shell(tmp_path),
        capture_output=True,
        text=True,
        timeout=840,
        stdin=subprocess.DEVNULL,
    )
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-60:])
    assert done.returncode == 0, tail

    ran = {
        f"{case.get('classname')}::{case.get('name')}": [child.tag for child in case]
        for case in ET.parse(report).getroot().iter("testcase")
    }
    failed = {name: tags for name, tags in ran.items() if {"failure", "error"} & set(tags)}
    assert not failed, failed
    passed = {name for name, tags in ran.items() if not tags}
    # the tests the issue saw fail, now on the fixture project
    for name in (
        "tests.unit.test_later::test_the_app_arguments_take_the_database_outputs_as_later_values",
        "tests.unit.test_graph::test_program_arguments_take_unknowns_a_fingerprint_records_and_still_refuse_bad_values",
        "tests.unit.test_clouds::test_an_environment_deployed_on_the_local_cloud_is_refused_on_aws",
        "tests.unit.test_clouds::test_backends_drift_marks_and_labels_are_per_cloud_and_marks_are_records",
    ):
        assert name in passed, name
    # the tests derived from the team's files ran for what the team added, in every environment
    derived = "tests.unit.test_committed::"
    for environment in ("dev", "staging", "prod", "pr-1"):
        for test in (
            f"test_every_stack_takes_its_upstream_outputs[{environment}/audit]",
            f"test_every_program_previews_under_pulumis_mock_runtime[{environment}/audit]",
            f"test_every_program_previews_under_pulumis_mock_runtime[{environment}/app]",
            f"test_every_project_node_is_a_pulumi_python_project_of_its_own_name[{environment}/site]",
            f"test_every_environment_loads_from_its_file[{environment}]",
        ):
            assert derived + test in passed, test
    # nothing was written where the shell's variables point
    for written in ("member-state", "member-cache", "member-backend", "member-pulumi"):
        assert not (tmp_path / written).exists(), written
