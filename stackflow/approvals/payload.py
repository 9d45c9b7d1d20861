"""What an approver signs: one canonical text naming the environment, the flow run waiting at the
gate, the digest of the plan shown and the commit it deploys. A signature over this text approves
that plan of that run only: another plan, run, environment or commit is another text."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from stackflow.plan import DeployPlan

NAMESPACE = "stackflow-approval"  # ssh-keygen -n: a signature made for anything else never passes
VERSION = "v1"  # the payload's form; a new form gets a new line here and stays verifiable


def plan_digest(plan: DeployPlan) -> str:
    """The digest of a plan as an approver sees it: the text shown (every change, the migrations
    with their statements, the commit, what protection is lowered) and what binds it to what is
    applied (each stack's input fingerprint, the pending files' checksums).

    Returns:
        "sha256:<hex>".
    """
    bound = {
        "shown": plan.markdown(),
        "fingerprints": {s.node: s.fingerprint for s in plan.stacks},
        "pinned": plan.pinned,
        "commit": plan.commit,
        "round": plan.round,
    }
    text = json.dumps(bound, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Request:
    """One approval request of a run waiting at the gate: what a signature must cover."""

    environment: str
    flow_run_id: str
    plan_digest: str
    commit: str | None

    def payload(self) -> bytes:
        """The canonical text that is signed: fixed lines in a fixed order, ASCII, one newline
        each (values never hold a newline: names, ids, hex digests)."""
        lines = [
            f"{NAMESPACE} {VERSION}",
            f"environment: {self.environment}",
            f"flow-run: {self.flow_run_id}",
            f"plan: {self.plan_digest}",
            f"commit: {self.commit or 'none'}",
        ]
        for line in lines:
            if "\n" in line or "\r" in line:
                raise ValueError(f"an approval payload line holds a line break: {line!r}")
        return ("\n".join(lines) + "\n").encode("ascii")

    def as_dict(self) -> dict[str, str | None]:
        """The request as the gate publishes it for `approve` to read."""
        return {
            "environment": self.environment,
            "flow_run_id": self.flow_run_id,
            "plan_digest": self.plan_digest,
            "commit": self.commit,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Request:
        """A request as published (see `as_dict`).

        Raises:
            ValueError: a field is missing or not text.
        """
        fields = {}
        for name in ("environment", "flow_run_id", "plan_digest"):
            value = data.get(name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"the approval request has no {name}")
            fields[name] = value
        commit = data.get("commit")
        return cls(**fields, commit=commit if isinstance(commit, str) else None)
