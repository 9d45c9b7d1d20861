"""Faults of what a command stands on, named before anything starts: an environment file nested
thousands deep, a PREFECT_API_URL that is not a URL, a project folder that is missing, a file or
a path the system refuses; and how an OSError of a full disk or a read-only file system, in
Python or in the Pulumi CLI's words, becomes one `error:` line and a `what to do:` line (exit 1),
never a traceback. The same on real file systems: tests/faults/test_infrastructure.py."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from cli.main import main
from stackflow import exits
from stackflow.infrastructure import DiskFull, ReadOnly, in_cli_text, named

pytestmark = pytest.mark.unit


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    """`main(args)`: its exit code and its stderr's lines."""
    code = main(list(args))
    return code, capsys.readouterr().err.splitlines()


def said(lines: list[str]) -> tuple[str, str]:
    """The `error:` line and the `what to do:` line."""
    error = next(line for line in lines if line.startswith("error: "))
    what = next((line.strip() for line in lines if "what to do:" in line), "")
    return error, what


def test_an_environment_file_nested_thousands_deep_is_named_not_a_traceback(
    machine: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = Path(machine["STACKFLOW_PROJECT_DIR"]) / "environments"
    (folder / "dev-1.toml").write_text('kind = "dev"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")

    code, lines = run(capsys, "up", "--env", "dev-1")

    assert code == exits.USAGE, lines
    error, what = said(lines)
    assert error == (
        "error: environments/dev-1.toml: arrays or tables nested too deep to read (thousands of "
        "levels); a settings file needs a few. Nothing was changed."
    )
    assert what.startswith("what to do: remove the deeply nested value from environments/dev-1")
    assert len("\n".join(lines)) < 1000 and not any("Traceback" in line for line in lines)


@pytest.mark.parametrize("value", ["not a url", "ftp://prefect/api", "http://:4200/api"])
def test_a_prefect_api_url_that_is_not_one_is_named_before_anything_starts(
    machine: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
) -> None:
    monkeypatch.setenv("PREFECT_API_URL", value)
    for command in (("up", "--env", "dev-1"), ("status",)):
        code, lines = run(capsys, *command)
        assert code == exits.USAGE, (command, lines)
        error, what = said(lines)
        assert error.startswith(f"error: PREFECT_API_URL={value!r} is not the address of a Prefect")
        assert "http(s)://<host>[:port]/api" in error and "unset it" in what
        assert not any("Traceback" in line for line in lines)


def test_a_project_folder_missing_a_file_or_too_long_is_named_as_the_variable(
    machine: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Never "environment not declared" for a folder that is not there, never a traceback for
    a 100 kB path; the error repeats at most a short piece of it."""
    (tmp_path / "a-file").write_text("")
    cases = {
        str(tmp_path / "missing"): "names no folder",
        str(tmp_path / "a-file"): "is a file, not a folder",
        "/tmp/" + "x" * 100_000: "cannot be used as the project folder (File name too long",
    }
    for value, why in cases.items():
        monkeypatch.setenv("STACKFLOW_PROJECT_DIR", value)
        code, lines = run(capsys, "up", "--env", "dev-1")
        assert code == exits.USAGE, lines
        error, what = said(lines)
        assert error.startswith("error: STACKFLOW_PROJECT_DIR=") and why in error, error
        assert len(error) < 400 and "not declared" not in error
        assert what.startswith("what to do: set STACKFLOW_PROJECT_DIR to the project's folder")


def test_full_disks_and_read_only_file_systems_are_named_from_python_and_from_the_cli() -> None:
    full = OSError(errno.ENOSPC, "No space left on device", "/state/records/x.json")
    wrapped = RuntimeError("while recording")
    wrapped.__cause__ = full
    fault = named(wrapped)
    assert isinstance(fault, DiskFull)
    assert str(fault).startswith("no space left on the device: writing '/state/records/x.json'")
    assert "`df -h /`" in fault.what_to_do  # the deepest folder that exists
    assert named(OSError(errno.ENOENT, "No such file")) is None
    assert named(ValueError("a bug")) is None

    text = (
        "error: failed to save snapshot: An IO error occurred while writing the new snapshot "
        'file: blob (key ".pulumi/stacks/p/dev.json") (code=Unknown): write '
        "/b/.pulumi/stacks/p/dev.json.1a2b.tmp: no space left on device"
    )
    cli_fault = in_cli_text(text, "a write of the Pulumi CLI's")
    assert isinstance(cli_fault, DiskFull)
    assert "a write of the Pulumi CLI's ('/b/.pulumi/stacks/p/dev.json.1a2b.tmp')" in str(cli_fault)
    locked = "open /b/.pulumi/locks/o/p/dev/x.json: read-only file system"
    assert isinstance(in_cli_text(locked, "a write of the Pulumi CLI's"), ReadOnly)
    assert in_cli_text("error: update failed", "x") is None
