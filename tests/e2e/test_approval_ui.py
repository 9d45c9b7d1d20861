"""The approval gate in the Prefect UI, in a real browser: `deployments/serve.py --env prod-*`
serves against a real Prefect server; a deploy of the protected environment pauses with its plan,
and a person approves or rejects it in the run's Resume form. The flows run on the real Pulumi
engine and the session's **local cloud** (moto on loopback, not AWS), with the environment's own
MariaDB for its migrations."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import save_screenshot
from tests.e2e.serving import Served, serving, wait_for_final, wait_for_state
from tests.faults.helpers import schema_history
from tests.realenv import declare, outputs, settings_for, unique

pytestmark = pytest.mark.e2e
ENVIRONMENT = unique("prod")


@pytest.fixture(scope="module")
def served(
    prefect_server: Any, local_cloud: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """serve.py for a prod-* environment, with a migrations folder of the module's own."""
    home = tmp_path_factory.mktemp("e2e-approval")
    migrations = home / "migrations"
    migrations.mkdir()
    (migrations / "V001__create_hello.sql").write_text("CREATE TABLE hello (id INT PRIMARY KEY);\n")
    sections = {"migrations": {"dir": str(migrations)}}
    # the machine's allowed signers (alice): used once a test names approvers in the file
    key = home / "alice"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    signers = home / "allowed_signers"
    signers.write_text(f"alice {Path(str(key) + '.pub').read_text()}")
    extra = {"STACKFLOW_APPROVAL_ALLOWED_SIGNERS": str(signers)}
    with serving(
        ENVIRONMENT, home, local_cloud, prefect_server, extra=extra, sections=sections
    ) as it:
        yield it


def _start_paused(client: Any, served: Served) -> Any:
    """A deploy of the environment, started through the API as the UI's Run button does, once it
    waits for approval."""
    deployment = client.read_deployment_by_name(f"deploy/{ENVIRONMENT}")
    run = client.create_flow_run_from_deployment(deployment.id)
    paused = wait_for_state(client, run.id, served, lambda s: s.is_paused() or s.is_final())
    assert paused.state.is_paused(), f"{paused.state}\n{served.log_tail()}"
    return paused


def _decide(page: Any, url: str, run_id: Any, decision: str, reason: str) -> Any:
    """Open the run's page, read the plan in its Resume form, decide with a reason."""
    from playwright.sync_api import expect

    page.goto(f"{url}/runs/flow-run/{run_id}")
    expect(page.locator(".state-badge").first).to_have_text("Paused")
    resume = page.get_by_role("button", name="Resume", exact=True)
    expect(resume).to_be_visible(timeout=30_000)
    resume.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(
        dialog.get_by_role("heading", name=re.compile(f"Plan for {ENVIRONMENT}"))
    ).to_be_visible()
    expect(dialog.get_by_text("local cloud", exact=False).first).to_be_visible()
    field = dialog.locator(".schema-form-property").filter(has_text="Decision")
    control = field.locator("button.p-select-button__control")
    control.press("Space")  # a click opens and closes this select at once; the key opens it
    page.get_by_role("option", name=decision, exact=True).click()
    expect(control).to_have_text(decision)
    dialog.locator(".schema-form-property", has_text="Reason").locator("textarea").fill(reason)
    return dialog


def test_a_first_deploy_of_prod_is_approved_in_the_ui_form_that_shows_its_plan(
    served: Served, page: Any, prefect_server: Any
) -> None:
    """Local cloud: the paused run's Resume form shows the plan (a table with a row per stack,
    the file to migrate); approving it there applies it: the run completes, its summary artifact
    records the approval and its reason, and the environment's database has the migration."""
    from playwright.sync_api import expect
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        paused = _start_paused(client, served)
        dialog = _decide(page, prefect_server.url, paused.id, "approve", "first release, LGTM")
        plan = dialog.get_by_role("table").first
        for stack in ("networking", "database", "app"):
            expect(plan.get_by_role("cell", name=stack, exact=True)).to_be_visible()
        expect(dialog.get_by_text("V001__create_hello.sql").first).to_be_visible()
        save_screenshot(page, "ui-approval-form")
        dialog.get_by_role("button", name="Submit", exact=True).click()
        expect(dialog).to_be_hidden(timeout=30_000)  # the resume answers slower on a busy machine
        run = wait_for_final(client, paused.id, served)
        assert run.state.is_completed(), f"{run.state}\n{served.log_tail()}"
        [artifact] = [
            a for a in client.read_latest_artifacts(limit=100) if a.key == f"up-{ENVIRONMENT}"
        ]
    expect(page.locator(".state-badge").first).to_have_text("Completed", timeout=30_000)
    assert "approved via the Prefect UI or API" in str(artifact.data)
    assert "first release, LGTM" in str(artifact.data)
    db = outputs(served.variables, ENVIRONMENT)["database"]
    from pydantic import SecretStr

    from stackflow.migrator.target import MysqlTarget

    target = MysqlTarget(db["host"], int(db["port"]), db["user"], SecretStr(db["password"]), "app")
    assert [r.version for r in schema_history(target)] == [1]


def test_a_new_migration_is_rejected_in_the_ui_and_nothing_is_applied(
    served: Served, page: Any, prefect_server: Any
) -> None:
    """Local cloud: a file added to the migrations folder makes the next deploy wait with it in
    its plan; rejecting it in the form ends the run Cancelled as "Rejected" (the page says so)
    with the reason, and the file was not applied."""
    from playwright.sync_api import expect
    from prefect.client.orchestration import get_client

    folder = settings_for(served.variables, ENVIRONMENT).migrations.dir
    (folder / "V002__drop_hello.sql").write_text("DROP TABLE hello;\n")
    with get_client(sync_client=True) as client:
        paused = _start_paused(client, served)
        dialog = _decide(page, prefect_server.url, paused.id, "reject", "drops a table: not today")
        expect(dialog.get_by_text("V002__drop_hello.sql").first).to_be_visible()
        expect(dialog.get_by_text("drop table").first).to_be_visible()  # the lint's finding
        dialog.get_by_role("button", name="Submit", exact=True).click()
        expect(dialog).to_be_hidden(timeout=30_000)  # the resume answers slower on a busy machine
        run = wait_for_final(client, paused.id, served)
    assert run.state.type.value == "CANCELLED" and run.state.name == "Rejected", run.state
    assert "drops a table: not today" in (run.state.message or "")
    expect(page.locator(".state-badge").first).to_have_text("Rejected", timeout=30_000)
    save_screenshot(page, "ui-approval-rejected")
    db = outputs(served.variables, ENVIRONMENT)["database"]
    from pydantic import SecretStr

    from stackflow.migrator.target import MysqlTarget

    target = MysqlTarget(db["host"], int(db["port"]), db["user"], SecretStr(db["password"]), "app")
    assert [r.version for r in schema_history(target)] == [1]


def test_with_approvers_a_bad_signature_in_the_form_is_refused_and_the_run_waits_again(
    served: Served, page: Any, prefect_server: Any
) -> None:
    """Local cloud: prod's file names approvers; a run started through the API (as the UI's Run
    button does: its requester is unknown, so one more approval is needed) shows a Signature
    field and what is needed. Approving with text that is no signature: the run pauses again and
    its form says why; a reject then ends it, nothing applied."""
    from playwright.sync_api import expect
    from prefect.client.orchestration import get_client

    folder = settings_for(served.variables, ENVIRONMENT).migrations.dir
    added = folder / "V003__create_later.sql"
    added.write_text("CREATE TABLE later (id INT PRIMARY KEY);\n")
    approval = {"approvers": ["alice", "bob"]}
    declare(served.variables, ENVIRONMENT, migrations={"dir": str(folder)}, approval=approval)
    try:
        with get_client(sync_client=True) as client:
            paused = _start_paused(client, served)
            first_key = paused.state.state_details.pause_key
            dialog = _decide(page, prefect_server.url, paused.id, "approve", "signed, I promise")
            needed = "2 more signed approvals needed of 2 (one more than required: who started"
            expect(dialog.get_by_text(needed).first).to_be_visible()
            signature = dialog.locator(".schema-form-property", has_text="Signature")
            signature.get_by_role("button", name="str", exact=True).click()  # text, not null
            signature.locator("textarea").fill("not a signature")
            dialog.get_by_role("button", name="Submit", exact=True).click()
            expect(dialog).to_be_hidden(
                timeout=30_000
            )  # the resume answers slower on a busy machine
            again = wait_for_state(
                client,
                paused.id,
                served,
                lambda s: (
                    s.is_final() or (s.is_paused() and s.state_details.pause_key != first_key)
                ),
            )
            assert again.state.is_paused(), f"{again.state}\n{served.log_tail()}"
            page.reload()
            page.get_by_role("button", name="Resume", exact=True).click()
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_text("Refused so far").first).to_be_visible()
            expect(dialog.get_by_text("not an SSH signature").first).to_be_visible()
            save_screenshot(page, "ui-approval-signature-refused")
            client.resume_flow_run(
                paused.id, run_input={"decision": "reject", "reason": "end of the test"}
            )
            run = wait_for_final(client, paused.id, served)
        assert run.state.name == "Rejected", run.state
    finally:
        added.unlink()
        declare(served.variables, ENVIRONMENT, migrations={"dir": str(folder)})
