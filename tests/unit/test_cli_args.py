"""The command line refuses input that means nothing, before anything starts (no servers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli.main import main as cli_main
from cli.parser import build_parser
from stackflow import exits
from tests.fixtures.template import template_graph

pytestmark = pytest.mark.unit
GRAPH = template_graph()  # the fixture project's graph, never the team's own


def main(argv: list[str]) -> int:
    """The command line's main(argv), checking it leaves os.environ as it found it: --env and
    --cloud are arguments of the settings and of the flow, never variables written for them (and
    a refused name never leaks into later tests of the same worker)."""
    before = dict(os.environ)
    try:
        return cli_main(argv)
    finally:
        assert dict(os.environ) == before, "the command line changed os.environ"


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
    assert "environment (--env): environment name 'Bad_Bad_" in err
    assert len(err) < 500 and "Bad_" * 30 not in err


def test_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["up", "--help"], ["drift", "--help"]):
        with pytest.raises(SystemExit) as stopped:
            build_parser().parse_args(argv)
        assert stopped.value.code == 0
        out = capsys.readouterr().out
        for code, meaning in exits.MEANINGS.items():
            assert f"{code:>3}  {meaning}" in out, (argv, code)
        # the environment and the cloud are arguments and files now, never variables
        assert "STACKFLOW_ENVIRONMENT" not in out and "STACKFLOW_CLOUD" not in out, argv


def test_every_command_that_runs_a_flow_takes_json() -> None:
    for command in ("up", "preview", "refresh", "destroy", "drift"):
        assert build_parser().parse_args([command, "--json"]).json is True
    assert build_parser().parse_args(["outputs", "--json"]).json is True


def test_the_flow_refuses_an_explicit_empty_stacks_list() -> None:
    """The flow parameter keeps "not given" (None) for every stack; [] is refused by name."""
    from flows.pipeline import _request
    from stackflow.engine import Operation
    from stackflow.errors import SettingsError

    assert _request("dev", None, Operation.UP, None).stacks == []  # every stack
    with pytest.raises(SettingsError, match="stacks: an empty list selects nothing"):
        _request("dev", None, Operation.UP, [])
    with pytest.raises(SettingsError, match="leave the parameter out"):
        _request("dev", "local", Operation.PREVIEW, [" "])


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
    # case: (argv, the environment's own file (sections) or None, variables, reason)
    "unknown stack": (["up", "--stacks", "nope"], None, {}, "unknown stack"),
    "protected destroy without --yes": (
        ["destroy", "--env", "prod-1"],
        None,
        {},
        "needs explicit",
    ),
    "deletion-protected database": (
        ["destroy", "--env", "dev-1", "--yes"],
        {"database": {"deletion_protection": True}},
        {},
        "deletion protection on",
    ),
    "gated up with --json": (["up", "--env", "prod-1", "--json"], None, {}, "no terminal to ask"),
    "deployed on the other cloud": (
        ["preview", "--env", "dev-1"],
        None,
        {"STACKFLOW_STATE_PASSPHRASE": "unit-test-passphrase"},  # for the AWS record below
        "deployed on AWS",
    ),
}


@pytest.mark.parametrize("case", REFUSED_BEFORE_ANY_SERVER)
def test_a_refused_run_starts_no_prefect_server(
    case: str,
    machine: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With no PREFECT_API_URL the CLI starts a local Prefect server for a run (10-15 s); a run
    that is refused anyway answers first: exit 2, the reason, and no server in the state folder."""
    from stackflow.environment_records import record_outcome, records_of
    from stackflow.settings import get_settings
    from stackflow.state import StateLayout
    from tests.realenv import declare

    argv, sections, variables, reason = REFUSED_BEFORE_ANY_SERVER[case]
    state = Path(machine["STACKFLOW_STATE_DIR"])
    if sections is not None:
        declare(machine, argv[argv.index("--env") + 1], **sections)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    if case == "deployed on the other cloud":
        aws = get_settings("dev-1", "aws")
        record_outcome(records_of(aws), aws, succeeded=True)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == exits.USAGE, err
    assert reason in err, err
    assert not StateLayout(state).prefect.exists(), "a Prefect server was started"
    assert "PREFECT_API_URL" not in os.environ


# A variable that names what an environment deploys: (variable, value, the file key it names).
ENVIRONMENT_VARIABLES = [
    ("STACKFLOW_APP_DESIRED_COUNT", "3", "`desired_count` under [app] in environments/<name>.toml"),
    ("STACKFLOW_CLOUD", "aws", "`cloud` in environments/<name>.toml"),
    ("STACKFLOW_AWS_REGION", "us-east-1", "`region` under [aws] in environments/<name>.toml"),
    ("STACKFLOW_MIGRATIONS_DIR", "/tmp/other", "`dir` under [migrations] in environments/"),
    ("STACKFLOW_APPROVAL_REQUIRED", "false", "`required` under [approval] in environments/"),
    ("STACKFLOW_KIND", "prod", "`kind` in environments/<name>.toml"),
    ("STACKFLOW_ENVIRONMENT", "prod-1", "choose the environment with --env"),
]


@pytest.mark.parametrize(
    ("variable", "value", "key"), ENVIRONMENT_VARIABLES, ids=[v[0] for v in ENVIRONMENT_VARIABLES]
)
@pytest.mark.parametrize("command", ["up", "destroy", "outputs", "migrate"])
def test_a_variable_naming_an_environment_setting_is_refused_before_anything_runs(
    command: str,
    variable: str,
    value: str,
    key: str,
    machine: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What an environment deploys lives in its file: the command line refuses a variable that
    says otherwise (exit 2), naming the variable and the key to set instead, before any server
    starts or any state is written (the state folder is not even created)."""
    monkeypatch.setenv(variable, value)
    argv = [command, "--env", "dev-1", *(["--yes"] if command in ("up", "destroy") else [])]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == exits.USAGE, err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert f"{variable}: " in line and key in line, line
    assert "remove the variable" in line or "--env" in line, line
    assert not Path(machine["STACKFLOW_STATE_DIR"]).exists(), "something was written"


@pytest.mark.parametrize(
    ("content", "line"),
    [
        # an unterminated quote would otherwise swallow the lines after it
        (b'STACKFLOW_STACK_RETRIES=1\nSTACKFLOW_STATE_DIR="/tmp/x\nSTACKFLOW_RETRY_DELAY_S=0\n', 2),
        (
            b"STACKFLOW_STACK_RETRIES=1\nSTACKFLOW_RETRY_DELAY_S=0\nSTACKFLOW_STATE_DIR=/tmp/\xff\n",
            3,
        ),
    ],
    ids=["unterminated-quote", "not-utf8"],
)
@pytest.mark.parametrize("argv", [["up", "--yes"], ["destroy", "--env", "prod-1", "--yes"]])
def test_a_malformed_dotenv_is_refused_naming_the_file_and_line(
    content: bytes,
    line: int,
    argv: list[str],
    machine: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A `.env` that cannot be read whole is refused, naming the file and the line; no setting of
    it is used, and the run acts on no environment at all (neither the default one nor --env's):
    exit 2 before anything is written."""
    dotenv = Path.cwd() / ".env"
    dotenv.write_bytes(content)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == exits.USAGE, err
    [shown] = [text for text in err.splitlines() if text.startswith("error: ")]
    assert f"{dotenv}, line {line}:" in shown, shown
    assert "no setting of that file was used" in shown, shown
    assert "dev" not in shown.replace(str(dotenv), "") and "prod-1" not in shown, shown
    assert not Path(machine["STACKFLOW_STATE_DIR"]).exists(), "something was written"


def test_a_bad_option_starts_no_prefect_server(
    machine: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from stackflow.state import StateLayout

    with pytest.raises(SystemExit) as stopped:
        main(["up", "--heartbeat", "0"])
    assert stopped.value.code == exits.USAGE
    assert "out of range" in capsys.readouterr().err
    assert not StateLayout(Path(machine["STACKFLOW_STATE_DIR"])).prefect.exists()


def test_rehearse_takes_a_stack_once_and_either_preview_or_destroy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`rehearse` names its project's stack (--stack), not an environment (--env)."""
    assert "--stack given twice" in refused(["rehearse", "p", "-s", "dev", "--stack", "x"], capsys)
    line = refused(["rehearse", "p", "--preview", "--destroy"], capsys)
    assert "not allowed with argument --preview" in line
    assert "unrecognized arguments: --env" in refused(["rehearse", "p", "--env", "dev"], capsys)
    args = build_parser().parse_args(["rehearse", "proj", "--json"])
    assert (args.stack, args.cloud, args.preview, args.destroy) == (None, None, False, False)
