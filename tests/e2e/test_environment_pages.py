"""The environments pages in the Prefect UI, in a real browser: an environment deployed and then
checked for drift from the command line (the real Pulumi engine on the session's **local cloud**:
moto on loopback, not AWS), its page `environment-<name>` showing what `status` says of it, with
one version per run (its history), and the overview `stackflow-status` linking to it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conftest import save_screenshot
from tests.realenv import cli, outputs, process_env, real_variables, unique

pytestmark = pytest.mark.e2e


@dataclass
class Deployed:
    environment: str
    variables: dict[str, str]
    commands: list[str]  # what each command printed, for a failure's message


@pytest.fixture(scope="module")
def deployed(
    prefect_server: Any, local_cloud: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployed]:
    """A dev environment of this module's own: `up`, then `drift` (each refreshes its page),
    run as a user runs them against the session's Prefect server."""
    variables = real_variables(
        tmp_path_factory.mktemp("pages") / "state", local_cloud, prefect_server
    )
    environment = unique("dev")
    env = process_env(variables)
    printed = []
    for command in ("up", "drift"):
        done = cli(env, command, "--env", environment)
        printed.append(done.stdout + done.stderr)
        assert done.returncode == 0, "\n".join(printed)
    yield Deployed(environment, variables, printed)
    cli(env, "destroy", "--env", environment, "--yes")


def _rows(table: Any) -> list[list[str]]:
    return [
        [cell.strip() for cell in row.locator("td").all_inner_texts()]
        for row in table.locator("tbody tr").all()
    ]


def test_an_environments_page_shows_its_status_outputs_and_history(
    deployed: Deployed, page: Any, prefect_server: Any
) -> None:
    from playwright.sync_api import expect

    env, url = deployed.environment, prefect_server.url
    app_url = str(outputs(deployed.variables, env)["app"]["url"])
    # its key's page: the environment in one line, then its history (a version per run, newest
    # first, each with the flow run that wrote it)
    page.goto(f"{url}/artifacts/key/environment-{env}")
    expect(
        page.get_by_text(re.compile(rf"^{env}: ready — healthy \(200, .* — http"))
    ).to_be_visible()
    runs_of_page = page.get_by_role("link", name=re.compile(rf"^(deploy|drift)-{env}$"))
    expect(runs_of_page).to_have_count(2)
    assert runs_of_page.all_inner_texts() == [f"drift-{env}", f"deploy-{env}"]
    save_screenshot(page, "environment-history")
    # the newest version: what `status` says of it
    page.get_by_role("listitem").first.get_by_role("heading").get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/artifacts/artifact/[0-9a-f-]+$"))
    expect(page.get_by_role("heading", name=re.compile(rf"^{env}\s*: ready$"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"healthy \(200, ")).first).to_be_visible()
    expect(page.get_by_text(app_url).first).to_be_visible()
    expect(page.get_by_text(re.compile(r"Z: no drift$"))).to_be_visible()
    # outputs, secrets masked: the database password shows as [secret], never in clear
    outs = page.locator("table").filter(has=page.get_by_role("columnheader", name="output"))
    assert ["app", "url", app_url] in _rows(outs)
    expect(outs.get_by_text("[secret]").first).to_be_visible()
    password = str(outputs(deployed.variables, env)["database"]["password"])
    assert password not in page.content()
    # the last runs, newest first, each linking to its flow run
    runs = page.locator("table").filter(has=page.get_by_role("columnheader", name="message"))
    assert [row[1:3] for row in _rows(runs)] == [["drift", "succeeded"], ["up", "succeeded"]]
    expect(runs.get_by_role("link")).to_have_count(2)
    save_screenshot(page, "environment-page")
    # the overview's newest version lists it, and its name links to the environment's history
    page.goto(f"{url}/artifacts/key/stackflow-status")
    page.get_by_role("listitem").first.get_by_role("heading").get_by_role("link").click()
    listing = page.locator("table").filter(has=page.get_by_role("columnheader", name="branch head"))
    row = listing.get_by_role("row").filter(has=page.get_by_role("link", name=env, exact=True))
    expect(row).to_have_count(1)
    expect(row.get_by_role("cell", name="ready", exact=True)).to_be_visible()
    save_screenshot(page, "environments-overview")
    link = row.get_by_role("link", name=env, exact=True).get_attribute("href")
    assert link == f"{url}/artifacts/key/environment-{env}", link
    page.goto(link)
    expect(runs_of_page).to_have_count(2)
