"""The command line's table of commands (cli/commands/__init__.py): a command is one module and
one entry that names it, its help and the function that runs it with typed settings; and the
outcome every command ends with: an `error:` line that says where all of it is only when a log
holds it, and with --json one JSON object on stdout, refusals included (real processes of
`python flows/run.py`, no servers)."""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.command import CodeCommand, Command
from cli.commands import COMMANDS
from cli.main import main
from cli.options import environment, json_object
from cli.parser import build_parser
from cli.report import one_line
from stackflow import exits
from stackflow.settings import Settings
from tests.realenv import ROOT, RUN_PY

pytestmark = pytest.mark.unit


def test_a_new_command_is_one_table_entry_and_receives_typed_settings(
    machine: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """What docs/development/commands.md says to do: a function and one entry. The command is in
    `--help`, takes the options its entry lists, and runs with the settings of its --env."""
    seen: list[tuple[argparse.Namespace, Settings]] = []

    def hello(args: argparse.Namespace, settings: Settings) -> int:
        seen.append((args, settings))
        print(json.dumps({"hello": settings.environment}))
        return exits.OK

    entry = Command("hello", "greet an environment", hello, (environment, json_object))
    table = (*COMMANDS, entry)
    with pytest.raises(SystemExit) as helped:
        build_parser(table).parse_args(["--help"])
    assert helped.value.code == 0
    assert "hello     greet an environment" in capsys.readouterr().out

    assert main(["hello", "--env", "dev-1", "--json"], commands=table) == exits.OK
    [(args, settings)] = seen
    assert args.json and isinstance(settings, Settings) and settings.environment == "dev-1"
    assert settings.state_dir == Path(machine["STACKFLOW_STATE_DIR"])
    assert json.loads(capsys.readouterr().out) == {"hello": "dev-1"}
    with pytest.raises(SystemExit) as refused:  # the shipped table does not have it
        main(["hello"])
    assert refused.value.code == exits.USAGE


def test_a_code_command_runs_where_settings_would_be_refused(
    machine: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`graph` reads the code only: a state folder that is a file refuses every command that
    reads settings (naming it), never one that reads none."""
    state = Path(machine["STACKFLOW_STATE_DIR"])
    state.write_text("not a folder")
    ran: list[argparse.Namespace] = []
    table = (
        CodeCommand("shape", "print the shape", lambda args: ran.append(args) or 0),
        Command("needs", "read the settings", lambda _args, _settings: 0),
    )
    assert main(["shape"], commands=table) == exits.OK and len(ran) == 1
    assert main(["needs"], commands=table) == exits.USAGE
    assert str(state) in capsys.readouterr().err


def test_every_shipped_command_is_named_once_in_table_order() -> None:
    names = [command.name for command in COMMANDS]
    assert len(names) == len(set(names)), names
    chooser = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    assert list(chooser.choices) == names
    assert {c.name for c in COMMANDS if isinstance(c, CodeCommand)} == {"graph"}


def test_every_settings_parameter_in_the_command_line_is_typed() -> None:
    """Commands receive typed settings: no parameter named `settings` in cli/ is Any or bare."""
    loose = [
        f"{path.relative_to(ROOT)}:{arg.lineno} {arg.arg}: "
        + (ast.unparse(arg.annotation) if arg.annotation else "(none)")
        for path in sorted((ROOT / "cli").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for arg in node.args.args + node.args.kwonlyargs
        if arg.arg == "settings" and not isinstance(node, ast.Lambda)
        if arg.annotation is None or ast.unparse(arg.annotation) != "Settings"
    ]
    assert not loose, loose


def test_a_cut_error_line_names_the_log_that_holds_all_of_it_or_how_much_was_cut() -> None:
    text = "word " * 200
    assert one_line(text, 100, log=Path("/state/logs/up-dev.log")).endswith(
        "… (all of it is in /state/logs/up-dev.log)"
    )
    cut = one_line(text, 100)
    assert cut.endswith(f"… ({len(text.strip()) - 99} more characters)")
    assert "log" not in cut and one_line("short", 100) == "short"


def run_py(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKFLOW_", "PREFECT_API"))}
    env["STACKFLOW_STATE_DIR"] = str(state)
    return subprocess.run(
        [sys.executable, str(RUN_PY), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_a_refused_rehearse_json_prints_one_object_and_no_log_it_did_not_write(
    tmp_path: Path,
) -> None:
    """A folder that does not exist, with a name long enough to cut the error line at 600
    characters: exit 2, stdout is one JSON object with the whole message, and the cut line says
    how much it left out, not that a log holds it (the refusal wrote none)."""
    missing = tmp_path.joinpath(*[f"{'deep' * 20}-{n}" for n in range(10)])
    state = tmp_path / "state"
    done = run_py("rehearse", str(missing), "--json", state=state)
    assert done.returncode == exits.USAGE, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["exit_code"] == exits.USAGE and outcome["log"] is None
    assert outcome["error"] == f"{missing}: no such folder. Nothing was changed."
    [line] = [text for text in done.stderr.splitlines() if text.startswith("error: ")]
    assert "all of it is in the log" not in line and line.endswith(" more characters)"), line
    assert len(line) < 700 and "Traceback" not in done.stderr
    assert not (state / "logs").exists()


def test_an_option_argparse_refuses_prints_one_json_object_with_json(tmp_path: Path) -> None:
    done = run_py("up", "--json", "--heartbeat", "0", state=tmp_path / "state")
    assert done.returncode == exits.USAGE
    outcome = json.loads(done.stdout)
    assert outcome["error"] == "argument --heartbeat: 0 is out of range: use 1 to 3600 seconds"
    assert outcome["what_to_do"] == "`python flows/run.py up --help` says what it accepts"
    assert "out of range" in done.stderr.splitlines()[-1]
    plain = run_py("up", "--heartbeat", "0", state=tmp_path / "state")
    assert plain.returncode == exits.USAGE and plain.stdout == ""
