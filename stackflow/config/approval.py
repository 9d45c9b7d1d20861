"""The approval gate's settings: whether `up` waits for approval, how long, and who may approve
by signing the plan (`stackflow.approvals`); and where the allowed signers come from
(`parse_source`: a path on this machine or a file on a git ref, which `stackflow.approvals.signers`
reads)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import Field, ValidationInfo, field_validator

from stackflow.config.section import Section

# As a principal is written in an allowed signers file; no patterns: an approver is one person.
_PRINCIPAL_RE = re.compile(r"^[^\s,\"'*?!]{1,200}$")


class ApprovalSettings(Section):
    """The approval gate: `up` of a protected environment waits for someone to approve its plan."""

    required: bool | None = Field(
        None,
        description="Pause every `up` for approval of its plan (stacks and migrations). Default "
        "from the kind (prod: on).",
    )
    timeout_s: int = Field(
        3600,
        ge=10,
        le=7 * 24 * 3600,
        description="How long a run waits for a decision before it ends, nothing applied "
        "(seconds, 10 s to 7 days).",
    )
    unprotect: str | None = Field(
        None,
        min_length=1,
        max_length=500,
        description="Why a prod or prod-* environment's protection (its kind, approval, "
        "deletion protection) is lowered: required to lower it, shown in the plan and recorded.",
    )
    exact_commit: bool = Field(
        False,
        description="Runs deploy an exact commit: a checkout with uncommitted edits is refused, "
        "naming the files. Always on for protected environments.",
    )
    approvers: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Who may approve, by their principal in the allowed signers file (e.g. "
        "alice@example.com): each approval must carry their SSH signature over the plan. Empty: "
        "anyone who reaches the gate approves, unsigned.",
    )
    approvals_needed: int | None = Field(
        None,
        ge=1,
        le=100,
        description="How many distinct approvers must sign the plan (1 to the number of "
        "approvers). Default: 1 when approvers are given.",
    )
    requester_may_approve: bool | None = Field(
        None,
        description="Whether who started the run may be one of its approvers. Default from the "
        "kind (prod: no; others: yes).",
    )
    allowed_signers: str | None = Field(
        None,
        description="Where the allowed signers file (git's format) of signed approvals is: an "
        "absolute path on this machine, or <ref>:<path> on a git ref of the project's "
        "repository (refs/heads/main:.stackflow/allowed_signers). Never the deployed commit.",
    )

    signing_key: Path | None = Field(
        None,
        description="The SSH private key (or, with ssh-agent, its public key) this machine's "
        "`up` and `approve` sign approvals with. Default: ~/.ssh/id_ed25519 when it exists.",
    )

    @field_validator("approvers")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _PRINCIPAL_RE.match(name):
                raise ValueError(
                    f"{name!r} is not a principal (1-200 characters, no spaces, commas, quotes or "
                    "wildcards; as written in the allowed signers file, e.g. alice@example.com)"
                )
        twice = sorted({n for n in value if value.count(n) > 1})
        if twice:
            raise ValueError(f"names an approver more than once: {', '.join(twice)}")
        return value

    @field_validator("approvals_needed")
    @classmethod
    def _needed(cls, value: int | None, info: ValidationInfo) -> int | None:
        approvers = info.data.get("approvers") or []
        if value is not None and value > len(approvers):
            raise ValueError(
                f"{value} approvals cannot be given by {len(approvers)} approver(s): set "
                "approvers (principals of the allowed signers file) and at most that many"
            )
        return value

    @field_validator("allowed_signers")
    @classmethod
    def _signers(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parse_source(value)  # ValueError names what is accepted
        return value.strip()


ACCEPTED = (
    "an absolute path to a file on this machine (/etc/stackflow/allowed_signers), or "
    "<ref>:<path> naming a file on a git ref of the project's repository "
    "(refs/heads/main:.stackflow/allowed_signers)"
)
_REF_RE = re.compile(r"^refs/[A-Za-z0-9._/-]{1,200}$")


@dataclass(frozen=True)
class SignersSource:
    """A parsed `allowed_signers` setting: a machine path, or a ref and a path in it."""

    path: Path | None = None
    ref: str | None = None
    ref_path: str | None = None

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else f"{self.ref}:{self.ref_path}"


def parse_source(value: str) -> SignersSource:
    """The source an `allowed_signers` setting names.

    Raises:
        ValueError: neither form, naming what is accepted.
    """
    text = value.strip()
    if text.startswith("refs/") and ":" in text:
        ref, _, path = text.partition(":")
        inner = PurePosixPath(path)
        if (
            _REF_RE.match(ref)
            and ".." not in ref
            and path
            and not inner.is_absolute()
            and ".." not in inner.parts
        ):
            return SignersSource(ref=ref, ref_path=str(inner))
    elif text.startswith("/") and ":" not in text:
        return SignersSource(path=Path(text))
    raise ValueError(f"{text[:80]!r} is not accepted: use {ACCEPTED}")
