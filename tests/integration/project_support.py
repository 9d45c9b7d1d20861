"""Pulumi Python projects of a test's own, written into a folder as a team would bring one, and
the settings and environment to run them with on the session's **local cloud** (moto on loopback,
not AWS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.realenv import process_env
from tests.realenv import test_project as stackflow_project


def write_project(
    folder: Path, name: str, program: str, files: dict[str, str], config: str = ""
) -> Path:
    """A Pulumi Python project: Pulumi.yaml (with `config`, YAML under `config:`; default: a
    `greeting` with a default), __main__.py and `files` (path -> text)."""
    folder.mkdir(parents=True)
    declared = config or "  greeting:\n    type: string\n    default: hello\n"
    (folder / "Pulumi.yaml").write_text(
        f"name: {name}\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n"
        f"config:\n{declared}"
    )
    (folder / "__main__.py").write_text(program)
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def rehearse_env(tmp_path: Path, local_cloud: Any | None = None) -> dict[str, str]:
    """A command's environment with a state folder of the test's own (no Prefect server), on the
    session's local cloud when one is given."""
    from stackflow.pulumi_cli import cache_root

    variables = {
        "STACKFLOW_CACHE_DIR": str(cache_root()),
        "STACKFLOW_PROJECT_DIR": str(stackflow_project(tmp_path / "stackflow-project")),
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
    }
    if local_cloud is not None:
        variables["STACKFLOW_LOCALCLOUD_DIR"] = str(local_cloud.root)
        variables["STACKFLOW_LOCALCLOUD_PORT"] = str(local_cloud.port)
    return process_env(variables)
