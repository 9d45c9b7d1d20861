"""The Prefect UI in a real browser: `deployments/serve.py --env dev` serving against a real Prefect
server, a run started with Run -> Quick run, and its summary artifact shown on the run's page.
The flows run on the real Pulumi engine and the session's **local cloud** (moto on loopback, not
AWS): the database stack gets its own MariaDB server there, so the migrations and the health check
really run."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import save_screenshot
from tests.e2e.serving import RUN_TIMEOUT_S, Served, runs_of, serving, wait_for_final
from tests.realenv import outputs

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def served(
    prefect_server: Any, local_cloud: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`python deployments/serve.py --env dev` with its own state folder, on the local cloud."""
    with serving("dev", tmp_path_factory.mktemp("e2e-serve"), local_cloud, prefect_server) as it:
        yield it


def test_quick_run_from_the_ui_deploys_dev_on_the_local_cloud_and_shows_its_summary(
    served: Served, page: Any, prefect_server: Any
) -> None:
    from playwright.sync_api import expect
    from prefect.client.orchestration import get_client

    from tests.fixtures.template import template_graph

    declared = template_graph()  # the graph the served project runs (its nodes.py)

    url = prefect_server.url
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("deploy/dev")
        before = {r.id for r in runs_of(client, deployment.id)}

        # Deployments list -> the `dev` deployment of the `deploy` flow
        page.goto(f"{url}/deployments")
        row = (
            page.get_by_role("row")
            .filter(has=page.get_by_role("link", name="deploy", exact=True))
            .filter(has=page.get_by_role("link", name="dev", exact=True))
        )
        expect(row).to_have_count(1)
        row.get_by_role("link", name="dev", exact=True).click()
        expect(page).to_have_url(re.compile(rf"/deployments/deployment/{deployment.id}"))

        # The custom-run form shows every parameter's description (from the parameter schema)
        page.get_by_role("button", name="Run", exact=True).click()
        page.get_by_role("link", name="Custom run").click()
        schema = deployment.parameter_openapi_schema or {}
        for prop in schema["properties"].values():
            expect(page.get_by_text(prop["description"], exact=True)).to_be_visible()

        def field(name: str) -> Any:
            label = page.get_by_text(f"{name} (Optional)", exact=True)
            return page.locator(".schema-form-property").filter(has=label)

        # types and defaults: the environment (frozen), an off switch for force, and
        # for stacks (none by default) a pick list of the graph's stacks
        # deploy/dev acts on dev only: its environment is a pick list holding dev alone
        environment = field("environment")
        expect(environment.locator(".p-select-button__value")).to_have_text("dev")
        # opened from the keyboard, as the stacks list below is: a click toggles it open and shut
        environment.locator("button.p-select-button__control").press("ArrowDown")
        expect(page.get_by_role("option")).to_have_text(["dev"])
        page.keyboard.press("Escape")
        expect(field("force").get_by_role("switch")).to_have_attribute("aria-checked", "false")
        expect(field("stacks").get_by_text('Property is type "None"')).to_be_visible()
        field("stacks").get_by_role("button", name="list", exact=True).click()
        field("stacks").locator("button.p-select-button__control").press("ArrowDown")
        expect(page.get_by_role("option")).to_have_text(declared.order())
        page.keyboard.press("Escape")
        page.go_back()

        # Run -> Quick run
        page.get_by_role("button", name="Run", exact=True).click()
        page.get_by_role("button", name="Quick run").click()
        expect(page.get_by_text("scheduled to start").first).to_be_visible()

        deadline = time.monotonic() + 30
        new: list[Any] = []
        while not new and time.monotonic() < deadline:
            new = [r for r in runs_of(client, deployment.id) if r.id not in before]
            time.sleep(0.5)
        assert len(new) == 1, f"Quick run created {len(new)} flow runs"
        run = wait_for_final(client, new[0].id, served)
        assert run.state.is_completed(), (
            f"{run.state.name}: {run.state.message}\n{served.log_tail()}"
        )
        assert run.parameters == {"environment": "dev"}
        assert run.name == "deploy-dev"

    # The run's page: Completed, and the summary artifact on its Artifacts tab
    page.goto(f"{url}/runs/flow-run/{run.id}")
    expect(page.get_by_text("deploy-dev", exact=True).first).to_be_visible()
    expect(page.get_by_text("Completed", exact=True).first).to_be_visible()
    page.get_by_role("tablist").get_by_text("Artifacts", exact=True).click()
    expect(page.get_by_text("stackflow up of dev (local cloud)")).to_be_visible()
    page.get_by_text("up-dev", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"/artifacts/artifact/[0-9a-f-]+$"))
    # the rendered markdown: says local cloud, one row per node with the status this deploy gave it
    expect(
        page.get_by_text("moto's AWS APIs on loopback: nothing was deployed to AWS")
    ).to_be_visible()
    table = page.locator("table").filter(has=page.get_by_role("columnheader", name="stack"))
    expected = {
        "networking": "updated",
        "database": "updated",
        "migrate": "migrated",
        "app": "updated",
        "verify": "healthy",
    }
    for stack, status in expected.items():
        row = table.get_by_role("row").filter(has=page.get_by_role("cell", name=stack, exact=True))
        expect(row).to_have_count(1)
        expect(row.get_by_role("cell", name=status, exact=True)).to_be_visible()
    # the graph with each node's status, as a table the UI renders (its markdown draws no Mermaid)
    graph = page.locator("table").filter(has=page.get_by_role("columnheader", name="needs"))
    expect(graph).to_be_visible()
    rows = [
        [cell.strip() for cell in row.locator("td").all_inner_texts()]
        for row in graph.locator("tbody tr").all()
    ]
    assert [row[1:] for row in rows] == [
        [name, expected[name], ", ".join(declared[name].upstream) or "—"]
        for name in declared.order()
    ], rows
    assert [int(row[0]) for row in rows] == [1, 2, 3, 4, 5]  # the stage each node runs in
    # the database password is an output: shown masked, never in clear
    expect(page.get_by_text("[secret]").first).to_be_visible()
    password = str(outputs(served.variables, "dev")["database"]["password"])
    assert password not in page.content()
    save_screenshot(page, "ui-deploy-dev-artifact")

    # The artifact's page by key lists this run's version
    page.goto(f"{url}/artifacts/key/up-dev")
    expect(page.get_by_text("stackflow up of dev (local cloud)")).to_be_visible()
    expect(page.get_by_role("link", name="deploy-dev").first).to_be_visible()


def test_cli_deployment_run_of_preview_completes_on_the_local_cloud(
    served: Served, prefect_server: Any
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.client.schemas.sorting import ArtifactSort

    prefect = str(Path(sys.executable).with_name("prefect"))
    result = subprocess.run(
        [prefect, "deployment", "run", "preview/dev", "--watch", "--watch-timeout", "150"],
        env={**served.env, "COLUMNS": "200"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{output}\n--- serve.py ---\n{served.log_tail()}"
    assert "Flow run finished successfully in 'Completed'" in output
    found = re.search(r"UUID:\s*([0-9a-f-]{36})", output)
    assert found, output
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(uuid.UUID(found.group(1)))
        deployment = client.read_deployment_by_name("preview/dev")
        assert run.deployment_id == deployment.id
        assert run.state is not None and run.state.is_completed()
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])),
            sort=ArtifactSort.CREATED_DESC,
            limit=10,
        )
    assert [a.key for a in artifacts] == ["preview-dev"]
    assert "(local cloud)" in (artifacts[0].description or "")
    assert "**local cloud**" in str(artifacts[0].data)
