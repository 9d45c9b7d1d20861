"""The import rules of the design, read from the source: imports point downward only
(deployments -> flows -> tasks -> stackflow -> programs), programs never import Prefect, only
the engine (its module and its error classifier) imports `pulumi.automation`, and the local cloud
never imports the migration runner."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["deployments", "flows", "tasks", "stackflow", "programs"]  # top to bottom
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
    ]
    assert sources(package), f"no sources found under {package}/"
    assert not offending, offending


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
    assert users == ["stackflow/engine/automation.py", "stackflow/engine/errors.py"]


def test_the_local_cloud_never_imports_the_migration_runner() -> None:
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("stackflow/localcloud")
        for name in imports_of(path)
        if name == "stackflow.migrations" or name.startswith("stackflow.migrations.")
    ]
    assert sources("stackflow/localcloud"), "no sources found under stackflow/localcloud/"
    assert not offending, offending
