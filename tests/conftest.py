"""Shared fixtures. Servers are started once per session and only by the tests that ask for them."""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.prefect_server",
    "tests.fixtures.mariadb",
]
