"""The approval gate of a protected environment, on the real Pulumi engine and the session's
**local cloud** (moto on loopback, not AWS) with the environment's own MariaDB: one `prod-*`
environment is deployed once for the module (approved with --yes), then each test plans a change
and decides: at a terminal, from another thread as the UI's form would, or not at all.

The project is a git checkout (a protected environment deploys an exact commit): each change of
the environment's file is committed, as a team would before deploying prod."""

from __future__ import annotations

import contextvars
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stackflow import exits
from tests.faults.helpers import schema_history
from tests.realenv import (
    ROOT,
    RUN_PY,
    cli,
    declare,
    git,
    outputs,
    process_env,
    real_variables,
    unique,
)
from tests.terminal import Terminal

pytestmark = pytest.mark.integration
ENVIRONMENT = unique("prod")
CREATE_SCRATCH = "CREATE TABLE scratch (id INT PRIMARY KEY, note VARCHAR(40));\n"
DROP_SCRATCH = "DROP TABLE scratch;\n"


@dataclass
class Prod:
    variables: dict[str, str]
    env: dict[str, str]
    migrations: Path
    first: subprocess.CompletedProcess[str]
    cloud: Any

    @property
    def project(self) -> Path:
        return Path(self.variables["STACKFLOW_PROJECT_DIR"])

    def declare(self, **sections: Any) -> Path:
        """Rewrite the environment's own file: its migrations folder and these sections (what
        every run of it deploys, from this process, the CLI or the UI), and commit it."""
        path = declare(
            self.variables, ENVIRONMENT, migrations={"dir": str(self.migrations)}, **sections
        )
        commit_all(self.project, f"{ENVIRONMENT}: {sections}")
        return path

    def service(self) -> dict[str, Any]:
        """The app's ECS service as the local cloud holds it."""
        app = outputs(self.variables, ENVIRONMENT)["app"]
        ecs = self.cloud.client("ecs")
        [service] = ecs.describe_services(
            cluster=app["cluster_name"], services=[app["service_name"]]
        )["services"]
        return dict(service)

    def task_cpu(self) -> str:
        arn = self.service()["taskDefinition"]
        return str(
            self.cloud.client("ecs").describe_task_definition(taskDefinition=arn)["taskDefinition"][
                "cpu"
            ]
        )

    def history(self) -> list[int]:
        """Versions applied to the environment's own database."""
        from pydantic import SecretStr

        from stackflow.migrator.target import MysqlTarget

        db = outputs(self.variables, ENVIRONMENT)["database"]
        target = MysqlTarget(
            db["host"], int(db["port"]), db["user"], SecretStr(db["password"]), db["database"]
        )
        return [r.version for r in schema_history(target) if r.success]


def commit_all(project: Path, message: str) -> None:
    if not (project / ".git").exists():
        git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "--allow-empty", "-m", message)


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any) -> Prod:
    """prod-* deployed once with `up --yes --json`: the plan is printed, approved at this command
    line, and applied; migrations come from a folder of the module's own."""
    base = tmp_path_factory.mktemp("approval")
    migrations = base / "migrations"
    migrations.mkdir()
    (migrations / "V001__create_hello.sql").write_text("CREATE TABLE hello (id INT PRIMARY KEY);\n")
    variables = real_variables(base / "state", local_cloud, prefect_server)
    declare(variables, ENVIRONMENT, migrations={"dir": str(migrations)})
    commit_all(Path(variables["STACKFLOW_PROJECT_DIR"]), "the project, prod declared")
    env = process_env(variables)
    first = cli(env, "up", "--env", ENVIRONMENT, "--yes", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    return Prod(variables, env, migrations, first, local_cloud)


def test_the_first_up_with_yes_prints_the_plan_and_records_who_approved_it(prod: Prod) -> None:
    """Local cloud: the plan shows every stack's creates (database and app with their upstream's
    ids known after its up) and the file to migrate on a database not deployed yet; one approval
    covers it all (the ids resolve when the stacks are applied, within what it showed); the JSON
    summary records the approval: at the command line with --yes, by this user on this host."""
    summary = json.loads(prod.first.stdout)
    err = prod.first.stderr
    assert f"plan for {ENVIRONMENT}  [local cloud: moto on loopback" in err
    assert re.search(rf"{ENVIRONMENT}/networking: \d+ to create, 0 to update", err), err
    assert "migrations: 1 pending on (database not deployed yet)" in err
    assert "V001__create_hello.sql  (1 statements" in err
    assert "approved with --yes: applying it" in err
    [approval] = summary["approvals"]
    assert approval["decision"] == "approved" and approval["round"] == 1
    assert re.fullmatch(r"command line --yes \(\S+@\S+\)", approval["via"]), approval
    assert {s["stack"]: s["status"] for s in summary["stacks"]} == {
        "networking": "updated",
        "database": "updated",
        "migrate": "migrated",
        "app": "updated",
        "verify": "healthy",
    }
    assert not list((Path(prod.variables["STACKFLOW_STATE_DIR"]) / "plans").rglob("*.json"))


def test_at_a_terminal_a_rejection_applies_nothing_and_an_approval_applies_the_plan(
    prod: Prod,
) -> None:
    """Local cloud: with the app's desired count changed, `up` in a terminal shows the change and
    asks. `no` with a reason: exit 4, the flow run ends Cancelled as "Rejected" with the reason,
    the service is untouched. `yes`: the one previewed update is applied under its plan (one
    preview, one up), and the cloud has the new count."""
    from prefect.client.orchestration import get_client

    assert prod.service()["desiredCount"] == 2  # prod's profile
    prod.declare(app={"desired_count": 3})
    env = prod.env

    def asked(*answers: str) -> Terminal:
        term = Terminal([sys.executable, str(RUN_PY), "up", "--env", ENVIRONMENT], env, ROOT)
        term.wait_for(r"Type yes to apply it, no to reject it", timeout=180)
        for text in answers:
            term.send(text.encode() + b"\n")
            if text == "no":
                term.wait_for(r"reason \(recorded with the decision\): ", timeout=10)
        term.wait(timeout=180)
        return term

    rejected = asked("no", "change freeze until Monday")
    text = rejected.text
    assert rejected.code == exits.REJECTED, text[-3000:]
    assert re.search(r"~ aws:ecs/service:Service  app\s+desiredCount: 2 => 3", text), text
    assert "migrations: none pending on" in text
    assert "rejected: nothing will be applied" in text
    assert re.search(
        r"^error: the plan for \S+ was rejected: nothing was applied .*change freeze until Monday",
        text,
        re.M,
    ), text
    assert prod.service()["desiredCount"] == 2
    run_id = re.findall(r"runs/flow-run/([0-9a-f-]{36})", text)[-1]
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run_id).state
        artifact = client.read_latest_artifacts(limit=50)
    assert state is not None and state.type.value == "CANCELLED" and state.name == "Rejected"
    assert "change freeze until Monday" in (state.message or "")
    plans = [a for a in artifact if a.key == f"plan-{ENVIRONMENT}"]
    assert plans and "desiredCount: 2 => 3" in str(plans[0].data)

    approved = asked("yes")
    text = approved.text
    assert approved.code == exits.OK, text[-3000:]
    assert "approved: applying it" in text
    assert re.search(r"^app\s+updated\s", text, re.M), text
    assert "engine operations: 2;" in text  # the plan's preview, then the up under it
    assert prod.service()["desiredCount"] == 3


def test_a_preview_shows_the_statements_pending_migrations_would_run_and_changes_nothing(
    prod: Prod,
) -> None:
    """Local cloud: `preview` (no approval needed) lists each pending file with its statements
    and destructive findings, read from the environment's database, and applies nothing."""
    extra = prod.migrations / "V009__preview_only.sql"
    extra.write_text("CREATE TABLE later (id INT);\nDELETE FROM hello;\n")
    try:
        before = prod.history()
        only = ("--stacks", "database,migrate")  # the migrations follow the database's preview
        text = cli(prod.env, "preview", "--env", ENVIRONMENT, *only)
        data = cli(prod.env, "preview", "--env", ENVIRONMENT, *only, "--json")
    finally:
        extra.unlink()
    assert text.returncode == 0 and data.returncode == 0, text.stdout + text.stderr
    assert re.search(r"^migrations: 1 pending on 127\.\S+:\d+/app$", text.stdout, re.M)
    assert "  V009__preview_only.sql  (2 statements" in text.stdout
    assert "! DESTRUCTIVE: statement 2: delete without where: DELETE FROM hello" in text.stdout
    assert re.search(r"^\s+1\. CREATE TABLE later \(id INT\)$", text.stdout, re.M)
    [pending] = json.loads(data.stdout)["migrations"]["pending"]
    assert pending["version"] == 9 and pending["statements"][1] == "DELETE FROM hello"
    assert prod.history() == before


def _in_process(prod: Prod, monkeypatch: pytest.MonkeyPatch, **sections: Any) -> None:
    """This machine's variables in this process, and the environment's file with `sections`."""
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in prod.variables.items():
        monkeypatch.setenv(key, value)
    prod.declare(**sections)


def _deploy_answering(
    on_request: Callable[[Any], bool | None],
) -> tuple[Any, list[Any]]:
    """Run the deploy flow in a thread of this process; `on_request(event)` is called for each
    approval request (in the flow's thread) and answers it: True approves, False rejects, None
    leaves it unanswered. Returns the final state and the requests seen."""
    from flows.approval import answer
    from flows.pipeline import deploy
    from stackflow.progress import ApprovalRequested, hub

    requests: list[Any] = []
    result: dict[str, Any] = {}

    def seen(event: Any) -> None:
        if isinstance(event, ApprovalRequested):
            requests.append(event)
            verdict = on_request(event)
            if verdict is not None:  # answered from another thread, as the UI's form is
                threading.Thread(
                    # in this context: Prefect's settings (the session's server) live there
                    target=contextvars.copy_context().run,
                    args=(answer, event.flow_run_id, verdict, f"test round {event.plan.round}"),
                    daemon=True,
                ).start()

    def run() -> None:
        result["state"] = deploy(environment=ENVIRONMENT, return_state=True)

    with hub().subscribed(seen):
        worker = threading.Thread(target=contextvars.copy_context().run, args=(run,))
        worker.start()
        worker.join(timeout=600)
    assert "state" in result, "the deploy flow did not end"
    return result["state"], requests


def test_a_run_with_nothing_to_change_asks_nobody(
    prod: Prod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local cloud: the UI's or a schedule's deploy of an up-to-date prod plans, finds nothing to
    change, and completes without pausing: no approval, no engine operation."""
    deployed = prod.service()["desiredCount"]  # as the cloud has it: nothing to change
    _in_process(prod, monkeypatch, app={"desired_count": deployed})
    state, requests = _deploy_answering(lambda _: True)
    assert state.is_completed(), state
    summary = state.result()
    assert requests == [] and summary["approvals"] == [] and summary["engine_calls"] == []
    # the run records the exact commit it deployed, never a "-dirty" checkout
    assert summary["commit"] == git(prod.project, "rev-parse", "HEAD")


def test_files_added_while_the_approval_waited_are_planned_and_asked_again(
    prod: Prod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local cloud: round 1 shows V002 pending; while it waits, V003 (a DROP TABLE) is added and
    round 1 is approved. The run re-checks the files before applying anything, asks again
    (round 2: both files, the DROP flagged destructive), and on approval applies both: approved
    findings are allowed in prod."""
    deployed = prod.service()["desiredCount"]  # only the files change
    _in_process(prod, monkeypatch, app={"desired_count": deployed})
    (prod.migrations / "V002__create_scratch.sql").write_text(CREATE_SCRATCH)

    def decide(event: Any) -> bool:
        if event.plan.round == 1:
            (prod.migrations / "V003__drop_scratch.sql").write_text(DROP_SCRATCH)
        return True

    state, requests = _deploy_answering(decide)
    assert state.is_completed(), state
    assert [r.plan.round for r in requests] == [1, 2]
    first, second = (r.plan for r in requests)
    assert [p.version for p in first.migrations.pending] == [2]
    assert [p.version for p in second.migrations.pending] == [2, 3]
    assert "added since approval: V003__drop_scratch.sql" in second.why_again
    [finding] = second.migrations.pending[1].findings
    assert finding.kind == "drop_table" and not finding.allowed
    summary = state.result()
    assert [a["round"] for a in summary["approvals"]] == [1, 2]
    assert prod.history() == [1, 2, 3]


def test_a_stack_changed_while_the_approval_waited_stops_the_run_and_asks_again(
    prod: Prod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local cloud: round 1 approves a new desired count for the app; meanwhile another run, from
    a checkout whose file gives the app more CPU, deploys it. Applying round 1's plan, Pulumi
    finds the task definition would be replaced, which the plan does not allow: the run stops
    there and asks again (round 2 shows the replacement), and on approval applies it."""
    _in_process(prod, monkeypatch, app={"desired_count": 4})

    def decide(event: Any) -> bool:
        if event.plan.round == 1:
            prod.declare(app={"cpu": 512, "desired_count": 3})  # the other checkout's file
            try:
                other = cli(prod.env, "up", "--env", ENVIRONMENT, "--stacks", "app", "--yes")
            finally:
                prod.declare(app={"desired_count": 4})  # this run's file again
            assert other.returncode == 0, other.stdout + other.stderr
            assert prod.task_cpu() == "512"
        return True

    state, requests = _deploy_answering(decide)
    assert state.is_completed(), state
    assert [r.plan.round for r in requests] == [1, 2]
    assert "changed while it was applied" in requests[1].plan.why_again
    assert "stack '" in requests[1].plan.why_again and "/app'" in requests[1].plan.why_again
    replaced = {r.type: r.change for r in requests[1].plan.stack("app").resources}
    assert replaced["aws:ecs/taskDefinition:TaskDefinition"] == "replace"
    assert prod.service()["desiredCount"] == 4 and prod.task_cpu() == "256"


def test_no_decision_in_time_ends_the_run_with_nothing_applied(
    prod: Prod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local cloud: nobody answers within the file's `timeout_s` under [approval] (10 s here): the
    flow run ends Cancelled as "ApprovalExpired", says so, and nothing was applied."""
    before = prod.service()["desiredCount"]
    _in_process(
        prod,
        monkeypatch,
        app={"desired_count": before + 1},
        approval={"timeout_s": 10},
    )
    state, requests = _deploy_answering(lambda _: None)
    assert len(requests) == 1
    assert state.type.value == "CANCELLED" and state.name == "ApprovalExpired", state
    assert "nothing was applied" in (state.message or "")
    summary = state.result(raise_on_failure=False)
    assert summary["approvals"][0]["decision"] == "expired"
    assert prod.service()["desiredCount"] == before


def test_a_prod_up_from_a_checkout_with_edits_is_refused_naming_them(
    prod: Prod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local cloud: prod deploys an exact commit. From a checkout whose environment file is
    edited and which holds a new file, `up --yes` and the deploy flow (as deploy/<env> runs it
    for the UI) are refused, naming both files; nothing is changed."""
    before = prod.service()["desiredCount"]
    _in_process(prod, monkeypatch, app={"desired_count": before})
    declare(  # edited, not committed
        prod.variables,
        ENVIRONMENT,
        migrations={"dir": str(prod.migrations)},
        app={"desired_count": before + 3},
    )
    (prod.project / "notes.txt").write_text("not committed\n")
    try:
        done = cli(prod.env, "up", "--env", ENVIRONMENT, "--yes", "--json")
        assert done.returncode == exits.USAGE, done.stdout + done.stderr
        named = f"uncommitted changes: environments/{ENVIRONMENT}.toml, notes.txt"
        assert named in done.stderr and "Traceback" not in done.stderr, done.stderr
        from flows.pipeline import deploy

        state = deploy(environment=ENVIRONMENT, return_state=True)
        assert state.is_failed() and named in str(state.message), state
    finally:
        git(prod.project, "checkout", "--", ".")
        (prod.project / "notes.txt").unlink()
    assert prod.service()["desiredCount"] == before


def _key(folder: Path, name: str) -> Path:
    """A new ed25519 key without a passphrase, as an approver makes one."""
    path = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
    )
    return path


def _paused_again(run_id: str, after: str | None) -> tuple[str, str]:
    """Wait until the run pauses under a new pause key; (that key, the form's description)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.input import read_flow_run_input

    with get_client(sync_client=True) as client:
        while True:  # the gate pauses within seconds: the pytest timeout bounds a broken one
            state = client.read_flow_run(UUID(run_id)).state
            details = state.state_details if state is not None else None
            if state is not None and state.is_paused() and details and details.run_input_keyset:
                key = str(details.pause_key)
                if key != after:
                    description = read_flow_run_input(
                        details.run_input_keyset["description"], UUID(run_id)
                    )
                    if description is not None:
                        return key, str(description)
            threading.Event().wait(0.2)


def test_signed_approvals_count_each_approver_once_and_refuse_what_is_not_theirs(
    prod: Prod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Local cloud: prod names three approvers (alice, bob, and the OS user who starts the run)
    of which two must sign. Through the Prefect API, as the UI's form does: a key not in the
    allowed signers file, alice's signature over another plan, the requester's own signature and
    alice's second approval are each refused, named, and the run pauses again; after alice's
    first signature it says one more is needed; bob's applies the plan. The summary and the
    audit log name the verified signers and every refusal."""
    from uuid import UUID

    from prefect.flow_runs import resume_flow_run
    from prefect.input import read_flow_run_input

    from flows.signed import REQUEST_KEY
    from stackflow.approvals.payload import Request
    from stackflow.approvals.signatures import sign
    from stackflow.audit import read_log
    from stackflow.audit.who import os_user
    from tests.realenv import settings_for

    me = os_user()
    keys = {name: _key(tmp_path, name) for name in ("alice", "bob", "mallory", "me")}
    signers = tmp_path / "allowed_signers"
    signers.write_text(
        "".join(
            f"{who} {Path(str(keys[name]) + '.pub').read_text()}"
            for who, name in (("alice", "alice"), ("bob", "bob"), (me, "me"))
        )
    )
    deployed = prod.service()["desiredCount"]
    approval = {"approvers": ["alice", "bob", me], "approvals_needed": 2}
    _in_process(prod, monkeypatch, app={"desired_count": deployed + 1}, approval=approval)
    monkeypatch.setenv("STACKFLOW_APPROVAL_ALLOWED_SIGNERS", str(signers))
    descriptions: list[str] = []

    def answer_all(event: Any) -> None:
        run_id = event.flow_run_id
        data = read_flow_run_input(f"{REQUEST_KEY}-{event.plan.round}", UUID(run_id))
        request = Request.from_dict(data)
        other = Request(request.environment, run_id, "sha256:" + "0" * 64, request.commit)
        answers = [
            ("mallory", request),
            ("alice", other),
            ("me", request),
            ("alice", request),
            ("alice", request),
            ("bob", request),
        ]
        key: str | None = None
        for name, signed in answers:
            key, text = _paused_again(run_id, key)
            descriptions.append(text)
            signature = sign(signed.payload(), keys[name])
            resume_flow_run(
                UUID(run_id),
                run_input={"decision": "approve", "reason": name, "signature": signature},
            )

    def on_request(event: Any) -> None:
        assert event.signed
        threading.Thread(
            target=contextvars.copy_context().run, args=(answer_all, event), daemon=True
        ).start()

    state, requests = _deploy_answering(on_request)
    assert state.is_completed(), state
    assert len(requests) == 1
    summary = state.result()
    [decision] = summary["approvals"]
    assert decision["decision"] == "approved" and decision["signers"] == ["alice", "bob"]
    refused = decision["refused"]
    assert len(refused) == 4, refused
    assert "not in the allowed signers file" in refused[0]
    assert "by alice does not cover this approval request" in refused[1]
    assert f"{me} started this run (command line)" in refused[2]
    assert "alice already approved this plan" in refused[3]
    assert "2 more signed approvals needed of 2" in descriptions[0]
    assert "1 more signed approval needed of 2; approved so far by: alice" in descriptions[4]
    assert "not in the allowed signers file" in descriptions[1]  # the why is shown again
    assert prod.service()["desiredCount"] == deployed + 1

    report, _ = read_log(settings_for(prod.variables, ENVIRONMENT))
    run_id = str(state.state_details.flow_run_id)
    run = [e for e in report.entries if e.action.startswith("approval.") and e.run == run_id]
    by_action = [(e.action, e.signer, e.verified) for e in run]
    assert by_action == [
        ("approval.refused", None, False),
        ("approval.refused", None, False),
        ("approval.refused", me, True),
        ("approval.signed", "alice", True),
        ("approval.refused", "alice", True),
        ("approval.signed", "bob", True),
        ("approval.approved", "alice, bob", True),
    ], by_action


def test_the_approve_command_signs_the_waiting_plan_and_says_what_the_run_refused(
    prod: Prod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Local cloud: `approve` with no run waiting is refused by name; with prod's run waiting for
    one of its approvers, `approve --key` with a key the allowed signers file does not hold
    exits 2 saying why (no traceback) and the run waits on; alice's key approves it, and the run
    applies the plan with alice recorded as its verified signer."""
    keys = {name: _key(tmp_path, name) for name in ("alice", "mallory")}
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"alice {Path(str(keys['alice']) + '.pub').read_text()}")
    env = {**prod.env, "STACKFLOW_APPROVAL_ALLOWED_SIGNERS": str(signers)}
    nobody = cli(env, "approve", "--env", ENVIRONMENT, "--key", str(keys["alice"]))
    assert nobody.returncode == exits.USAGE, nobody.stdout + nobody.stderr
    assert f"no run of {ENVIRONMENT} waits at its approval gate" in nobody.stderr
    deployed = prod.service()["desiredCount"]
    approval = {"approvers": ["alice", "bob"]}
    _in_process(prod, monkeypatch, app={"desired_count": deployed - 1}, approval=approval)
    monkeypatch.setenv("STACKFLOW_APPROVAL_ALLOWED_SIGNERS", str(signers))
    said: dict[str, subprocess.CompletedProcess[str]] = {}

    def approve_from_the_command_line(event: Any) -> None:
        run = ("approve", "--env", ENVIRONMENT, "--run", event.flow_run_id)
        said["mallory"] = cli(env, *run, "--key", str(keys["mallory"]))
        said["alice"] = cli(env, *run, "--key", str(keys["alice"]))

    answering: list[threading.Thread] = []

    def on_request(event: Any) -> None:
        answering.append(
            threading.Thread(
                target=contextvars.copy_context().run,
                args=(approve_from_the_command_line, event),
                daemon=True,
            )
        )
        answering[-1].start()

    state, _ = _deploy_answering(on_request)
    [command_line] = answering
    command_line.join(timeout=120)  # the command prints what the run made of its answer
    refused, approved = said["mallory"], said["alice"]
    assert refused.returncode == exits.USAGE, refused.stdout + refused.stderr
    assert (
        "error: the run refused this approval: the key that made this signature is not in "
        "the allowed signers file" in refused.stderr
    )
    assert "Traceback" not in refused.stderr
    assert approved.returncode == exits.OK, approved.stdout + approved.stderr
    assert "approved: the signature was checked and counted" in approved.stderr, approved.stderr
    assert f"environment: {ENVIRONMENT}" in approved.stderr and "plan: sha256:" in approved.stderr
    assert state.is_completed(), state
    [decision] = state.result()["approvals"]
    assert decision["signers"] == ["alice"] and len(decision["refused"]) == 1
    assert prod.service()["desiredCount"] == deployed - 1


def test_up_with_yes_signs_the_plan_with_this_machine_s_key(prod: Prod, tmp_path: Path) -> None:
    """Local cloud: prod names this OS user as its one approver and lets the requester approve;
    `up --yes` signs the plan at the gate with STACKFLOW_APPROVAL_SIGNING_KEY (never printing the
    key), and the summary records this user as the verified signer."""
    from stackflow.audit.who import os_user

    me = os_user()
    key = _key(tmp_path, "me")
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"{me} {Path(str(key) + '.pub').read_text()}")
    deployed = prod.service()["desiredCount"]
    approval = {"approvers": [me], "requester_may_approve": True}
    prod.declare(app={"desired_count": deployed + 1}, approval=approval)
    env = {
        **prod.env,
        "STACKFLOW_APPROVAL_ALLOWED_SIGNERS": str(signers),
        "STACKFLOW_APPROVAL_SIGNING_KEY": str(key),
    }
    done = cli(env, "up", "--env", ENVIRONMENT, "--yes", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    [decision] = json.loads(done.stdout)["approvals"]
    assert decision["decision"] == "approved" and decision["signers"] == [me], decision
    private = key.read_text().splitlines()[1]
    assert private not in done.stdout + done.stderr
    assert prod.service()["desiredCount"] == deployed + 1


def test_protection_cannot_be_dropped_by_one_line(prod: Prod) -> None:
    """Local cloud (runs last: it lowers the module's prod): a committed `kind = "dev"` in prod's
    file makes `up --yes` and `destroy --yes` refuse, naming the file and `unprotect`; nothing
    changes. Approval turned off with a reason: the run that lowers it is still gated (the
    recorded protection), its plan says what is lowered and why, and once approved the record
    keeps the reason; the next `up` no longer waits for anyone."""
    from stackflow.environment_records import read, records_of
    from tests.realenv import settings_for

    deployed = prod.service()["desiredCount"]
    prod.declare(kind="dev", app={"desired_count": deployed})
    for command in ("up", "destroy"):
        done = cli(prod.env, command, "--env", ENVIRONMENT, "--yes", "--json")
        assert done.returncode == exits.USAGE, done.stdout + done.stderr
        assert f"environments/{ENVIRONMENT}.toml lowers the protection" in done.stderr
        assert "kind prod -> dev" in done.stderr and "unprotect" in done.stderr
    assert prod.service()["desiredCount"] == deployed

    why = "reviews approve every change before it merges"
    prod.declare(app={"desired_count": deployed}, approval={"required": False, "unprotect": why})
    gated = cli(prod.env, "up", "--env", ENVIRONMENT, "--json")  # no terminal to ask: refused
    assert gated.returncode == exits.USAGE and "is a protected environment" in gated.stderr
    done = cli(prod.env, "up", "--env", ENVIRONMENT, "--yes", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"protection lowered: approval of every up: on -> off (why: {why})" in done.stderr
    assert [a["decision"] for a in json.loads(done.stdout)["approvals"]] == ["approved"]
    record = read(records_of(settings_for(prod.variables, ENVIRONMENT)), ENVIRONMENT)
    assert record is not None and record.extra["unprotected"]["reason"] == why
    assert record.extra["protection"]["approval"] is False
    again = cli(prod.env, "up", "--env", ENVIRONMENT, "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["approvals"] == []
