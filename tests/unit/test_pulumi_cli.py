"""The Pulumi CLI's cache, lookup and build steps, against tiny stand-in `pulumi` and `go` scripts.

No Go build runs here: the scripts answer the few commands the module asks of them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from stackflow.errors import EngineUnavailable
from stackflow.pulumi_cli import CLI_VERSION, build_cli, cache_root, cli_path, find_cli, main
from stackflow.pulumi_cli import build as pulumi_build

pytestmark = pytest.mark.unit


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH of our own and an empty cache: nothing from the machine leaks in."""
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", str(path))
    monkeypatch.setenv("STACKFLOW_CACHE_DIR", str(tmp_path / "cache"))
    return path


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def fake_pulumi(bin_dir: Path, prints: str) -> Path:
    """A `pulumi` that prints `prints` and appends a line to calls.log each time it runs."""
    calls = bin_dir.parent / "calls.log"
    return script(bin_dir / "pulumi", f'echo run >> "{calls}"\necho {prints}')


def calls(bin_dir: Path) -> int:
    log = bin_dir.parent / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


# --- cache_root ----------------------------------------------------------------------------------


def test_cache_root_prefers_stackflow_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKFLOW_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "mine"
    assert cli_path() == tmp_path / "mine" / "pulumi" / f"v{CLI_VERSION}" / "bin" / "pulumi"


def test_cache_root_then_xdg_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STACKFLOW_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "stackflow"

    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: absolute only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "stackflow"


# --- find_cli ------------------------------------------------------------------------------------


def test_find_cli_refuses_another_version_on_path(bin_dir: Path) -> None:
    fake_pulumi(bin_dir, "v3.1.0")
    assert find_cli() is None
    assert not cli_path().exists()


def test_find_cli_links_the_exact_version_into_the_cache_and_remembers_it(bin_dir: Path) -> None:
    on_path = fake_pulumi(bin_dir, f"v{CLI_VERSION}")

    found = find_cli()

    assert found == cli_path()
    assert found.resolve() == on_path.resolve()
    assert calls(bin_dir) == 1
    assert find_cli() == cli_path()  # the stamp answers: no second `pulumi version`
    assert calls(bin_dir) == 1


def test_find_cli_asks_again_when_the_binary_changes(bin_dir: Path) -> None:
    on_path = fake_pulumi(bin_dir, f"v{CLI_VERSION}")
    assert find_cli() == cli_path()

    on_path.unlink()  # replaced by another version: a new file, so the stamp no longer matches
    fake_pulumi(bin_dir, "v4.0.0")  # another size too

    assert find_cli() is None


def test_find_cli_reuses_the_cached_binary_without_path(bin_dir: Path) -> None:
    cached = cli_path()
    cached.parent.mkdir(parents=True)
    script(cached, f"echo v{CLI_VERSION}")
    assert find_cli() == cached


# --- build_cli -----------------------------------------------------------------------------------


def test_build_cli_without_go_says_to_install_go(bin_dir: Path) -> None:
    with pytest.raises(EngineUnavailable) as info:
        build_cli(say=lambda line: None)
    message = str(info.value)
    assert "needs Go, which is not on PATH" in message
    assert "https://go.dev/dl" in message
    assert f"v{CLI_VERSION} on PATH" in message


def test_build_cli_refuses_a_go_too_old_for_the_module(bin_dir: Path) -> None:
    script(bin_dir / "go", 'echo "go version go1.19.8 linux/amd64"')
    with pytest.raises(EngineUnavailable, match=r"Go 1\.19, too old"):
        build_cli(say=lambda line: None)


def test_build_cli_names_the_failed_step_and_shows_the_tail_of_go_output(bin_dir: Path) -> None:
    script(
        bin_dir / "go",
        'if [ "$1" = version ]; then echo "go version go1.25.11 linux/amd64"; exit 0; fi\n'
        'i=1; while [ $i -le 40 ]; do echo "go: fake failure line $i"; i=$((i+1)); done\n'
        "exit 1",
    )
    said: list[str] = []

    with pytest.raises(EngineUnavailable) as info:
        build_cli(say=said.append)

    message = str(info.value)
    assert "failed at step 'download modules'" in message
    assert "go: fake failure line 40" in message
    assert "go: fake failure line 11\n" in message  # the last 30 lines...
    assert "go: fake failure line 10\n" not in message  # ...and no more
    log = cli_path().parent.parent / "build.log"
    assert f"Full log: {log}" in message
    assert "go: fake failure line 1\n" in log.read_text()
    assert any(line.startswith("download modules:") for line in said)
    assert not cli_path().exists()


def test_build_cli_runs_the_steps_with_progress_and_puts_the_binary_in_the_cache(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = "/usr/local/bin:/usr/bin:/bin"
    sleep, chmod = shutil.which("sleep", path=tools), shutil.which("chmod", path=tools)
    script(
        bin_dir / "go",
        'case "$1" in\n'
        '  version) echo "go version go1.25.11 linux/amd64" ;;\n'
        "  list) echo fmt; echo os; echo example.com/pulumi ;;\n"
        "  build)\n"
        '    while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
        f"    echo os; echo example.com/pulumi; {sleep} 0.5\n"
        f'    printf "#!/bin/sh\\necho v{CLI_VERSION}\\n" > "$out"; {chmod} +x "$out" ;;\n'
        "esac",
    )
    monkeypatch.setattr(pulumi_build, "PROGRESS_SECONDS", 0.1)
    said: list[str] = []

    built = build_cli(say=said.append)

    assert built == cli_path() and find_cli() == cli_path()
    steps = [line.split(":")[0] for line in said]
    assert steps.index("download modules") < steps.index("compile") < steps.index("verify")
    assert any(re.fullmatch(r"compile: \d+ s, 2/3 packages", line) for line in said)
    assert any(
        re.fullmatch(
            r"compile: done in \d+ s \(2 packages compiled, 1 from Go's build cache\)", line
        )
        for line in said
    )
    assert said[-1].startswith(f"Pulumi CLI v{CLI_VERSION}: built {cli_path()} in ")
    assert list(cli_path().parent.glob(".pulumi.*")) == []  # no temporary file left behind


def test_build_cli_refuses_a_module_pinned_at_another_version(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pulumi_build, "CLI_VERSION", "3.1.0")
    with pytest.raises(EngineUnavailable, match=r"pins the Pulumi CLI at v\S+, but the installed"):
        build_cli(say=lambda line: None)


# --- command line --------------------------------------------------------------------------------


def test_main_ensure_reports_reuse(bin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake_pulumi(bin_dir, f"v{CLI_VERSION}")
    assert main(["ensure"]) == 0
    assert capsys.readouterr().out.startswith(f"Pulumi CLI v{CLI_VERSION}: reused {cli_path()}")


def test_main_fails_with_the_message_and_no_traceback(
    bin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ensure"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: building the Pulumi CLI") and "Traceback" not in err
    assert main(["path"]) == 1
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"v{CLI_VERSION}\n"
