"""Shared fixtures. Servers are started once per session and only by the tests that ask for them."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.template import TEMPLATE

pytest_plugins = [
    "tests.fixtures.reaper",
    "tests.fixtures.prefect_server",
    "tests.fixtures.mariadb",
    "tests.fixtures.localcloud",
    "tests.fixtures.postgres",
    "tests.fixtures.s3backend",
]

SHELL_PREFIXES = ("STACKFLOW_", "PREFECT_", "PULUMI_")
"""Variables of the shell that runs the tests that would change what stackflow, Prefect or the
Pulumi CLI read: none of them reaches a test."""
TOOLS = ("STACKFLOW_CACHE_DIR", "STACKFLOW_CHROMIUM")
"""Where this machine keeps the tools the real-engine tiers run (the Pulumi CLI setup.sh built,
a browser), not settings of any run: kept for those tiers, never seen by a unit test."""


def pytest_configure(config: pytest.Config) -> None:
    """The shell's STACKFLOW_*, PREFECT_* and PULUMI_* variables are taken away before anything
    is collected: a module that reads one when it is imported (the flows' stack names, Prefect's
    settings) would otherwise see a team member's. Every test sets what it runs with (the unit
    tier's `hermetic` fixture, tests/realenv.py for the others)."""
    for key in [k for k in os.environ if k.startswith(SHELL_PREFIXES) and k not in TOOLS]:
        del os.environ[key]


@pytest.fixture(autouse=True)
def hermetic(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The unit tier is hermetic: whatever shell runs it, each test marked `unit` sees the same
    machine. No STACKFLOW_*, PREFECT_* or PULUMI_* variable (not the tools' either, nor one a
    session fixture of the same worker set, such as the Prefect server's address); the fixture
    project (tests/fixtures/template/, never the team's own graph and environment files) as the
    project; a state folder of its own; a working folder without a `.env`. Other tiers set what
    they run with themselves (tests/realenv.py)."""
    if request.node.get_closest_marker("unit") is None:
        return
    for key in [k for k in os.environ if k.startswith(SHELL_PREFIXES)]:
        monkeypatch.delenv(key)
    machine = tmp_path_factory.mktemp("machine")
    monkeypatch.setenv("STACKFLOW_PROJECT_DIR", str(TEMPLATE))
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(machine / "state"))
    (machine / "work").mkdir()
    monkeypatch.chdir(machine / "work")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests last: while Playwright's sync API is open, the thread has a running asyncio
    loop, and in-process Prefect calls made then would behave as if called from async code.

    Tests marked `slow` run only when the marker expression names them (`-m slow`,
    `-m "integration or slow"`): they wait minutes on purpose, beyond the default run's budget."""
    if "slow" not in (config.getoption("markexpr") or ""):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)  # stable sort
