"""Rotating the team's passphrase: every stack of the project in the team's backend re-encrypted
with `pulumi stack change-secrets-provider passphrase` (the current passphrase from
STACKFLOW_STATE_PASSPHRASE, the new one on the CLI's standard input; see
`stackflow.engine.automation.transfer`).

Which passphrase opens a stack is read from its checkpoint first (`stackflow.engine.pulumisecrets`),
so a run is decided before anything changes: a stack the current passphrase opens is rotated, one
the new passphrase opens already was (a second run, or one that stopped half-way, finishes the
rest), and one neither opens is refused, naming it.

What it means for the skip path: a stack's stamp seals its outputs under a key from the
passphrase, and it is not sealed again here (that would be a second write of each checkpoint after
Pulumi's own, which could overwrite an update a worker made in between). A stack without secret
outputs keeps being skipped (its stamp needs no passphrase); the next `up` of a stack with secret
outputs cannot open the old seal, so it runs once (0 changes) and stamps again under the new
passphrase. Workers' cached salts heal themselves (`stackfile.forget_cached_salt`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stackflow.backends import mask_url
from stackflow.engine.checkpoints import CheckpointReader
from stackflow.engine.pulumisecrets import passphrase_opens, passphrase_salt
from stackflow.redact import Redactor
from stackflow.settings import Settings
from stackflow.teamops import TeamOpsError, TeamOpsRefused

NEW_PASSPHRASE = "STACKFLOW_NEW_STATE_PASSPHRASE"
MIN_LENGTH = 12


def check_new_passphrase(new: str, current: str, where: str) -> str:
    """`new` if it may become the team's passphrase.

    Raises:
        TeamOpsRefused: empty, shorter than 12 characters, with spaces around it or a control
            character (the CLI reads one trimmed line), or the current one; names `where`
            (never the value).
    """
    problem = ""
    if not new:
        problem = "is empty"
    elif new != new.strip() or any(not c.isprintable() for c in new):
        problem = (
            "has spaces around it or a control character (the Pulumi CLI reads one trimmed line)"
        )
    elif len(new) < MIN_LENGTH:
        problem = f"is shorter than {MIN_LENGTH} characters"
    elif new == current:
        problem = "is the current passphrase"
    if problem:
        raise TeamOpsRefused(f"the new passphrase from {where} {problem}. Nothing was changed.")
    return new


@dataclass
class RotationReport:
    """Per stack: rotated, already on the new passphrase, or never deployed."""

    backend: str
    stacks: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "stacks": dict(self.stacks)}

    def lines(self) -> list[str]:
        width = max([len(n) for n, _ in self.stacks] + [10])
        out = [f"  stack {name:<{width}}  {what}" for name, what in self.stacks]
        done = sum(1 for _, what in self.stacks if what.startswith("re-encrypted"))
        out.append(f"re-encrypted {done} of {len(self.stacks)} stack(s) in {self.backend}")
        return out


def current_passphrase(settings: Settings) -> str:
    """The team's current passphrase (STACKFLOW_STATE_PASSPHRASE), when it may be rotated.

    Raises:
        TeamOpsRefused: a KMS provider, no passphrase set, or Pulumi Cloud; names the setting.
    """
    if settings.secrets_provider not in (None, "passphrase"):
        raise TeamOpsRefused(
            f"the secrets provider is {settings.secrets_provider}, not a passphrase: rotate the key "
            "in its KMS, or move to another key with `pulumi stack change-secrets-provider "
            "<url>`. Nothing was changed."
        )
    if settings.state_passphrase is None:
        raise TeamOpsRefused(
            "set STACKFLOW_STATE_PASSPHRASE to the team's current passphrase (the local cloud's "
            "generated passphrase is not rotated: it also keys the local cloud's own journal). "
            "Nothing was changed."
        )
    if (settings.backend_url or "").startswith("https://"):
        raise TeamOpsRefused(
            "the backend is Pulumi Cloud, whose stacks use its own secrets: nothing to rotate here"
        )
    return settings.state_passphrase.get_secret_value()


def rotate_passphrase(
    settings: Settings, new: str, say: Callable[[str], object] = lambda _l: None
) -> RotationReport:
    """Re-encrypt every stack of the project in the backend under `new` (checked already).

    Raises:
        TeamOpsRefused: not a passphrase setup, or a stack neither passphrase opens; nothing was
            changed.
        StateTransferError: a `pulumi` command failed (a lock held: a run is going); the stacks
            rotated before it are said; run it again once the run ended.
        TeamOpsError: a stack was rotated and still does not open with the new passphrase.
    """
    from stackflow.engine.automation.transfer import BackendSession, StackRef

    current = current_passphrase(settings)
    url = settings.resolved_backend_url
    report = RotationReport(mask_url(url))
    prefix = f"{settings.project}-"
    with CheckpointReader(url) as reader:
        plan: list[tuple[str, str, str]] = []  # (project, stack, what to do)
        neither = []
        for project, stack in reader.all_stacks():
            if not project.startswith(prefix):
                continue
            found = reader.checkpoint(project, stack)
            salt = passphrase_salt(found.secrets_provider) if found is not None else None
            if salt is None:
                plan.append((project, stack, "never deployed: nothing to re-encrypt"))
            elif passphrase_opens(salt, current):
                plan.append((project, stack, "rotate"))
            elif passphrase_opens(salt, new):
                plan.append((project, stack, "already on the new passphrase"))
            else:
                neither.append(f"{project}/{stack}")
        if neither:
            raise TeamOpsRefused(
                f"neither STACKFLOW_STATE_PASSPHRASE nor the new passphrase opens "
                f"{', '.join(neither)} in {report.backend}: set the passphrase those stacks use. "
                "Nothing was changed."
            )
        home = None
        if settings.cloud == "local":
            from stackflow.localcloud.paths import pulumi_home

            home = pulumi_home(settings.localcloud_root)
        with BackendSession(url, current, pulumi_home=home, redactor=Redactor([current, new])) as s:
            for project, stack, what in plan:
                name = f"{project}/{stack}"
                if what == "rotate":
                    s.change_passphrase(StackRef(project, stack), new)
                    after = reader.checkpoint(project, stack)
                    salt = passphrase_salt(after.secrets_provider) if after is not None else None
                    if salt is None or not passphrase_opens(salt, new):
                        raise TeamOpsError(
                            f"{name} in {report.backend} was rotated but the new passphrase does "
                            "not open it; run the rotation again"
                        )
                    what = "re-encrypted under the new passphrase"
                report.stacks.append((name, what))
                say(f"stack {name}: {what}")
    return report
