"""The import rules of the design, read from the source: imports point downward only
(cli -> deployments -> flows -> graph -> tasks -> stackflow -> programs), the command line is
imported by nothing but its door (`python flows/run.py`), programs never import Prefect, flows
never import programs, only the engine imports `pulumi.automation`, and the local cloud never
imports the migration runner."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
LAYERS = [
    "cli",
    "deployments",
    "flows",
    "graph",
    "tasks",
    "stackflow",
    "programs",
]  # top to bottom
DOOR = "flows/run.py"  # the command users type: the one module below cli that imports it
PROGRAM_IMPORTS = {"pulumi", "pulumi_aws", "pulumi_random", "pydantic", "programs"}


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", LAYERS)
def test_imports_point_downward_only(package: str) -> None:
    above = set(LAYERS[: LAYERS.index(package)])
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources(package)
        for name in imports_of(path)
        if name.split(".")[0] in above
        and not (str(path.relative_to(ROOT)) == DOOR and name.split(".")[0] == "cli")
    ]
    assert sources(package), f"no sources found under {package}/"
    assert not offending, offending


def test_nothing_imports_the_command_line_but_its_door() -> None:
    """`python flows/run.py` stays the command users type: that thin door (the standard library
    and cli only) is the one exception to "imports point downward"; no other module, the
    benchmarks included, reaches up into cli/."""
    importers = sorted(
        str(path.relative_to(ROOT))
        for package in [*LAYERS[1:], "bench"]
        for path in sources(package)
        if any(name.split(".")[0] == "cli" for name in imports_of(path))
    )
    assert importers == [DOOR]
    allowed = set(sys.stdlib_module_names) | {"__future__", "cli"}
    assert {name.split(".")[0] for name in imports_of(ROOT / DOOR)} <= allowed


def test_programs_import_pulumi_and_pydantic_only() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("programs")
        for name in imports_of(path)
        if name.split(".")[0] not in PROGRAM_IMPORTS | stdlib
    ]
    assert not offending, offending


def test_only_the_engine_and_its_error_classifier_import_the_automation_api() -> None:
    users = sorted(
        str(path.relative_to(ROOT))
        for package in LAYERS
        for path in sources(package)
        if any(
            n == "pulumi.automation" or n.startswith("pulumi.automation.") for n in imports_of(path)
        )
    )
    assert users and all(
        u.startswith("stackflow/engine/automation/") or u == "stackflow/engine/classify.py"
        for u in users
    ), users


def test_flows_never_import_programs() -> None:
    """Flows walk the graph; only the graph's declaration (graph/) and tasks know programs."""
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("flows")
        for name in imports_of(path)
        if name.split(".")[0] == "programs"
    ]
    assert not offending, offending


def test_the_local_cloud_never_imports_the_migration_runner() -> None:
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("stackflow/localcloud")
        for name in imports_of(path)
        if name == "stackflow.migrator" or name.startswith("stackflow.migrator.")
    ]
    assert sources("stackflow/localcloud"), "no sources found under stackflow/localcloud/"
    assert not offending, offending
