"""The command line refuses input that means nothing, before anything starts (no servers)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import main
from cli.parser import build_parser
from stackflow import exits
from stackflow.graph import GRAPH

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _restored_environment() -> Iterator[None]:
    """main() writes --env and --cloud into os.environ (the flows read them there): restore them
    after each test, so a refused name never leaks into later tests of the same worker."""
    names = ("STACKFLOW_ENVIRONMENT", "STACKFLOW_CLOUD")
    before = {name: os.environ.get(name) for name in names}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error argparse prints for `argv`, after checking it exits with the usage code."""
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == exits.USAGE
    err = capsys.readouterr().err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("value", ["", ",", " , ", ",,,"])
def test_an_empty_stacks_list_is_refused_never_read_as_every_stack(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["up", "--stacks", value], capsys)
    assert "--stacks" in line and "names no stack" in line and "leave it out" in line


def test_an_empty_name_between_commas_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["preview", "--stacks", "app,,database"], capsys)
    assert "empty name between commas" in line


def test_a_repeated_env_is_refused_not_the_last_one_wins(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = refused(["up", "--env", "dev", "--env", "prod"], capsys)
    assert "--env given twice" in line
    line = refused(["destroy", "-e", "dev", "--env", "dev"], capsys)
    assert "given twice" in line


def test_repeated_stacks_are_a_union_in_the_order_given() -> None:
    args = build_parser().parse_args(
        ["up", "--stacks", "app", "--stacks", "database,app", "--stacks", "networking"]
    )
    assert args.stacks == ["app", "database", "networking"]


def test_a_long_unknown_stack_is_echoed_shortened(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["outputs", "--stacks", "x" * 5000])
    err = capsys.readouterr().err
    assert code == exits.USAGE
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "unknown stack" in line and len(line) < 200
    assert all(name in line for name in GRAPH.order())  # what is accepted


def test_a_long_environment_name_is_echoed_shortened(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["outputs", "--env", "Bad_" * 2000])
    err = capsys.readouterr().err
    assert code == exits.USAGE
    assert err.startswith("error: invalid settings:")
    assert "STACKFLOW_ENVIRONMENT: environment name 'Bad_Bad_" in err
    assert len(err) < 500 and "Bad_" * 30 not in err


def test_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["up", "--help"], ["drift", "--help"]):
        with pytest.raises(SystemExit) as stopped:
            build_parser().parse_args(argv)
        assert stopped.value.code == 0
        out = capsys.readouterr().out
        for code, meaning in exits.MEANINGS.items():
            assert f"{code:>3}  {meaning}" in out, (argv, code)


def test_every_command_that_runs_a_flow_takes_json() -> None:
    for command in ("up", "preview", "refresh", "destroy", "drift"):
        assert build_parser().parse_args([command, "--json"]).json is True
    assert build_parser().parse_args(["outputs", "--json"]).json is True


def test_the_flow_refuses_an_explicit_empty_stacks_list() -> None:
    """The flow parameter keeps "not given" (None) for every stack; [] is refused by name."""
    from flows.pipeline import _request
    from stackflow.engine import Operation
    from stackflow.errors import SettingsError

    assert _request("dev", Operation.UP, None).stacks == []  # every stack
    with pytest.raises(SettingsError, match="stacks: an empty list selects nothing"):
        _request("dev", Operation.UP, [])
    with pytest.raises(SettingsError, match="leave the parameter out"):
        _request("dev", Operation.PREVIEW, [" "])


def test_graph_json_is_the_declared_graph(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["graph", "--json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert [n["name"] for n in nodes] == GRAPH.order()
    assert {n["name"]: n["upstream"] for n in nodes} == {
        n: list(GRAPH[n].upstream) for n in GRAPH.order()
    }
    assert {n["name"] for n in nodes if n["kind"] == "stack"} == set(GRAPH.stacks)


REFUSED_BEFORE_ANY_SERVER = {
    "unknown stack": (["up", "--stacks", "nope"], {}, "unknown stack"),
    "protected destroy without --yes": (["destroy", "--env", "prod-1"], {}, "needs explicit"),
    "deletion-protected database": (
        ["destroy", "--env", "dev-1", "--yes"],
        {"STACKFLOW_DATABASE_DELETION_PROTECTION": "true"},
        "deletion protection on",
    ),
    "gated up with --json": (["up", "--env", "prod-1", "--json"], {}, "no terminal to ask"),
    "deployed on the other cloud": (
        ["preview", "--env", "dev-1"],
        {"STACKFLOW_STATE_PASSPHRASE": "unit-test-passphrase"},  # for the AWS record below
        "deployed on AWS",
    ),
}


@pytest.mark.parametrize("case", REFUSED_BEFORE_ANY_SERVER)
def test_a_refused_run_starts_no_prefect_server(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With no PREFECT_API_URL the CLI starts a local Prefect server for a run (10-15 s); a run
    that is refused anyway answers first: exit 2, the reason, and no server in the state folder."""
    from stackflow.environments import record_deploy
    from stackflow.processes import free_port
    from stackflow.settings import get_settings
    from stackflow.state import StateLayout

    argv, variables, reason = REFUSED_BEFORE_ANY_SERVER[case]
    state = tmp_path / "state"
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(state))
    monkeypatch.setenv("STACKFLOW_CLOUD", "local")
    monkeypatch.setenv("STACKFLOW_LOCAL_PREFECT_PORT", str(free_port()))  # never another's server
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    if case == "deployed on the other cloud":
        record_deploy(get_settings(environment="dev-1", cloud="aws", state_dir=state))
    code = main(argv)
    err = capsys.readouterr().err
    assert code == exits.USAGE, err
    assert reason in err, err
    assert not StateLayout(state).prefect.exists(), "a Prefect server was started"
    assert "PREFECT_API_URL" not in os.environ


def test_a_bad_option_starts_no_prefect_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stackflow.state import StateLayout

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as stopped:
        main(["up", "--heartbeat", "0"])
    assert stopped.value.code == exits.USAGE
    assert "out of range" in capsys.readouterr().err
    assert not StateLayout(tmp_path / "state").prefect.exists()
