"""What the worker's own code checks before it hands a commit to that commit's code, and what it
expects back.

A sync runs the commit's own stackflow, which holds everything the worker holds (backend access,
the passphrase, cloud credentials, the Prefect API): the commit can skip any check its own code
makes. So the checks that must not be skipped run here, in the worker's code, on the exported
files, before the commit's code starts: each is a function of a `Handoff` that raises
`CommitRefused` (or a `SettingsError`, refused alike) naming what it found. Add a check by adding
it to `CHECKS` (policies go there; `approval_rules` keeps who approves out of the
commit's hands). Afterwards, a run that ends without the
summary the worker expects is failed, never "deployed" (`verify_summary`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.scope import check_scope
from stackflow.config import guards
from stackflow.config.protection import Protection
from stackflow.environment_records import check_cloud, recorded_protection
from stackflow.gitops.locked import LOCK_FILE, check_locked
from stackflow.gitops.tree import CommitRefused
from stackflow.outcome import Status
from stackflow.records import Records
from stackflow.settings import Settings, get_settings

REQUIRED_FILES = (LOCK_FILE, "flows/run.py")  # what a worker runs a commit with


@dataclass
class Handoff:
    """One commit about to run on this worker: the worker's own settings of the environment, the
    exported files, what is recorded, and what the checks found (for the summary's check)."""

    settings: Settings
    records: Records
    checkout: Path
    commit: str
    commit_settings: Settings | None = None  # the commit's environment file, read by this worker
    protection: Protection | None = None  # the stronger of the recorded and the commit's


def scope(handoff: Handoff) -> None:
    """The deployment this run belongs to acts on this environment (and its kind)."""
    check_scope(handoff.settings.environment)


def locked_dependencies(handoff: Handoff) -> None:
    """The commit locks the dependencies this worker was set up with."""
    if not (handoff.settings.project_dir / LOCK_FILE).is_file():
        raise CommitRefused(
            f"this worker has no {LOCK_FILE} in its own project ({handoff.settings.project_dir}): "
            "it cannot tell which dependencies it runs, so it runs no commit. Set the worker up "
            "from a checkout (scripts/setup.sh). Nothing was run."
        )
    check_locked(handoff.checkout, handoff.settings.project_dir, handoff.commit)


def environment_file(handoff: Handoff) -> None:
    """The commit's file for the environment is there, the project's own (no link out), and
    accepted, as this worker's code reads it."""
    worker = handoff.settings
    handoff.commit_settings = get_settings(
        worker.environment,
        project_dir=handoff.checkout,
        state_dir=worker.state_dir,
        strict=False,
    )


def protection(handoff: Handoff) -> None:
    """The commit keeps the environment's protection, or says why it lowers it (prod names);
    the cloud it names is the one the environment lives on."""
    commit = handoff.commit_settings
    assert commit is not None, "environment_file runs first"
    check_cloud(commit, handoff.records)
    recorded = recorded_protection(handoff.records, commit.environment)
    guarded = commit.with_recorded_protection(recorded)  # ProtectionLowered: refused
    handoff.protection = guarded.file_protection.stronger(recorded)


def approval_rules(handoff: Handoff) -> None:
    """The commit keeps the environment's signed-approval rules as this worker's own project
    says them: who may approve, how many must, whether the requester may. A commit that edits
    them is refused by name (its change goes through the trusted branch's own review and reaches
    the worker from there); the allowed signers are this machine's setting, which no commit's
    file may set."""
    commit = handoff.commit_settings
    assert commit is not None, "environment_file runs first"
    if guards.approval_rules(commit) == guards.approval_rules(handoff.settings):
        return  # the rules as the gate reads them (the kind's defaults included) are the same
    named = ("approvers", "approvals_needed", "requester_may_approve")  # [approval]'s keys
    trusted = handoff.settings.approval
    edited = [k for k in named if getattr(commit.approval, k) != getattr(trusted, k)]
    env = commit.environment
    raise CommitRefused(
        f"commit {handoff.commit[:12]} changes who approves {env}: {', '.join(edited) or 'its rules'} under "
        f"[approval] in environments/{env}.toml differ from this worker's own project. "
        "Approval rules are read from the worker's trusted side, never from the commit "
        "being deployed: change them on the trusted branch, through its own review, and "
        "update the worker from it. Nothing was run."
    )


CHECKS: list[Callable[[Handoff], None]] = [
    scope,
    locked_dependencies,
    environment_file,
    protection,
    approval_rules,
]


def check_handoff(handoff: Handoff, checks: list[Callable[[Handoff], None]] | None = None) -> None:
    """Run every check (`CHECKS`) on the commit before its code runs.

    Raises:
        CommitRefused, SettingsError: the first check that refuses it, naming what it found.
    """
    for check in CHECKS if checks is None else checks:
        check(handoff)


def verify_summary(handoff: Handoff, code: int, summary: dict[str, Any]) -> str | None:
    """Why a run that exited 0 is not a deploy the worker can record ("" reasons never), or None
    when its summary is the full one a deploy of this commit ends with: this environment, `up`,
    this commit, a row per stack and no failure, and an approval when its protection asks for
    one and something changed."""
    env = handoff.settings.environment
    if not summary:
        return f"the run printed no summary (exit code {code}): nothing shows it deployed"
    wanted = {"environment": env, "operation": "up", "commit": handoff.commit}
    wrong = [
        f"{k} {summary.get(k)!r} (expected {v!r})" for k, v in wanted.items() if summary.get(k) != v
    ]
    if wrong:
        return "its summary is not this deploy's: " + ", ".join(wrong)
    stacks = summary.get("stacks")
    if not isinstance(stacks, list) or not stacks:
        return "its summary lists no stack"
    if not all(isinstance(s, dict) and s.get("stack") and s.get("status") for s in stacks):
        return "its summary has stack rows without a stack or a status"
    if summary.get("failed") or summary.get("stopped"):
        return (
            f"its summary says it did not finish: {summary.get('failed') or summary.get('stopped')}"
        )
    guard = handoff.protection
    calls = [str(c) for c in summary.get("engine_calls") or []]
    changed = any(c.startswith("up:") for c in calls) or any(
        s.get("status") == Status.MIGRATED for s in stacks
    )
    decisions = [a.get("decision") for a in summary.get("approvals") or [] if isinstance(a, dict)]
    if guard is not None and guard.approval and changed and "approved" not in decisions:
        return (
            f"{env} needs approval of every change (its recorded protection), and the run's "
            "summary shows changes with no approval"
        )
    rules = guards.approval_rules(handoff.settings)  # this worker's, never the commit's
    if rules is not None and changed:
        approvers, needed, _ = rules
        signed = {
            str(signer)
            for a in summary.get("approvals") or []
            if isinstance(a, dict) and a.get("decision") == "approved"
            for signer in a.get("signers") or []
        }
        if len(signed & set(approvers)) < needed:
            return (
                f"{env} needs {needed} signed approval(s) by its approvers, and the run's summary "
                f"names {', '.join(sorted(signed)) or 'none'}"
            )
    return None
