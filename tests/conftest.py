"""Shared fixtures. Servers are started once per session and only by the tests that ask for them."""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.fixtures.reaper",
    "tests.fixtures.prefect_server",
    "tests.fixtures.mariadb",
    "tests.fixtures.localcloud",
    "tests.fixtures.postgres",
    "tests.fixtures.s3backend",
]


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
