"""Moving a one-machine state folder into the team's backend: every stack of its file backend
(`<state>/pulumi-<cloud>`) and every record of its records folder (`<state>/records`).

Each stack: `stack export --show-secrets` from the folder with its passphrase, the deployment
given the new stack's own secrets provider, `stack import` into the team's backend, which
encrypts every secret for the team's passphrase (see `stackflow.engine.automation.transfer`).
The stamp's seal (the outputs sealed under a key from the passphrase, see `stackflow.fingerprint`)
is opened with the old passphrase and sealed again with the team's: the move changes neither
the resources nor the inputs the stamp vouches for, so the first team run skips the stack with no
engine call. A seal that does not open is left as it is: the team's passphrase cannot open it
either, and that stack runs once (never a wrong skip).

Safe to run twice: a stack already moved from this folder (a `moved/<project>/<stack>` record in
the team's store says from where and which update) is left alone, even after the team updated it
since; a record already there is left alone. Refused, before anything changes: a passphrase that
does not open a stack of the folder, and a team stack of the same name that is another stack (or
was moved from here, after which the folder's copy was deployed to again). The folder is left as
it was: the Pulumi update history stays in it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stackflow.audit import HEAD_KEY
from stackflow.backends import backend_for, mask_url
from stackflow.engine.base import INTERNAL_OUTPUT
from stackflow.engine.checkpoints import Checkpoint, CheckpointReader
from stackflow.engine.envelope import SECRET_SIG
from stackflow.engine.pulumisecrets import passphrase_opens, passphrase_salt
from stackflow.localcloud.paths import cloud_root
from stackflow.records import ABSENT, RecordConflict, Records
from stackflow.redact import Redactor
from stackflow.secretbox import StampSeal
from stackflow.settings import Settings
from stackflow.state import StateLayout
from stackflow.teamops import TeamOpsRefused

SOURCE_PASSPHRASE = "STACKFLOW_FROM_STATE_PASSPHRASE"
MOVED = "moved"  # records: moved/<project>/<stack> -> {from, manifest_time, moved_at}


@dataclass(frozen=True)
class Source:
    """The state folder to move, the cloud whose file backend moves, and its passphrase.

    Attributes:
        passphrase_from: how errors name where the passphrase came from (a variable or a file).
    """

    state_dir: Path
    cloud: str
    passphrase: str = field(repr=False)
    passphrase_from: str

    @property
    def folder(self) -> Path:
        return StateLayout(self.state_dir).file_backend(self.cloud)

    @property
    def backend_url(self) -> str:
        return f"file://{self.folder}"

    @property
    def records(self) -> Path:
        return StateLayout(self.state_dir).records


def find_source(state_dir: Path, cloud: str, environ: Mapping[str, str]) -> Source:
    """The state folder's file backend and its passphrase: STACKFLOW_FROM_STATE_PASSPHRASE, else
    the passphrase the local cloud generated in that folder.

    Raises:
        TeamOpsRefused: no such folder or file backend, or no passphrase; nothing was changed.
    """
    state_dir = state_dir.expanduser().resolve()
    folder = StateLayout(state_dir).file_backend(cloud)
    if not (folder / ".pulumi").is_dir():
        raise TeamOpsRefused(
            f"--from-state {state_dir}: no file backend of the {cloud} cloud in it ({folder}/.pulumi "
            "is missing); name the state folder a one-person setup used (STACKFLOW_STATE_DIR, by "
            "default .stackflow in the project), and --cloud when it deployed to aws. "
            "Nothing was changed."
        )
    explicit = environ.get(SOURCE_PASSPHRASE)
    if explicit:
        return Source(state_dir, cloud, explicit, SOURCE_PASSPHRASE)
    generated = cloud_root(state_dir) / "passphrase"
    if generated.is_file() and generated.read_text().strip():
        return Source(state_dir, cloud, generated.read_text().strip(), str(generated))
    raise TeamOpsRefused(
        f"set {SOURCE_PASSPHRASE} to the passphrase the stacks in {folder} were deployed with (the "
        f"STACKFLOW_STATE_PASSPHRASE of that setup); the local cloud's generated one ({generated}) "
        "does not exist either. Nothing was changed."
    )


@dataclass
class MoveReport:
    """What moved, per stack and per record, in the order it was decided."""

    source: str
    target: str
    records_target: str
    stacks: list[tuple[str, str]] = field(default_factory=list)  # (project/stack, outcome)
    records: list[tuple[str, str]] = field(default_factory=list)  # (key, outcome)

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "backend": self.target,
            "records": self.records_target,
            "stacks": dict(self.stacks),
            "record_outcomes": dict(self.records),
        }

    def lines(self) -> list[str]:
        width = max([len(n) for n, _ in self.stacks + self.records] + [10])
        out = [f"  stack  {name:<{width}}  {what}" for name, what in self.stacks]
        out += [f"  record {key:<{width}}  {what}" for key, what in self.records]
        moved = sum(1 for _, what in self.stacks if what.startswith("moved"))
        kept = sum(1 for _, what in self.records if what.startswith("kept"))
        new = sum(1 for _, what in self.records if what == "moved")
        out.append(
            f"moved {moved} of {len(self.stacks)} stack(s) and {new} of {len(self.records)} "
            f"record(s) into {self.target}; {kept} record(s) kept as the team's (they differ)"
        )
        return out


@dataclass
class _Plan:
    project: str
    stack: str
    source: Checkpoint
    action: str  # move | fill | moved-before
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.project}/{self.stack}"


def _team_backend(settings: Settings) -> str:
    url = settings.backend_url or ""
    kind = backend_for(url) if url else None
    if kind is None or not kind.self_managed or kind.folder(url) is not None:
        raise TeamOpsRefused(
            "STACKFLOW_BACKEND_URL names no team backend (it is "
            f"{mask_url(url) if url else 'unset: the file backend of this state folder'}): point it "
            "at the team's PostgreSQL (postgres://...) or S3 (s3://...) first. Nothing was changed."
        )
    return url


def decide(
    source: Checkpoint,
    target: Checkpoint | None,
    marker: Mapping[str, Any] | None,
    origin: str,
) -> tuple[str, str]:
    """(action, note) for one stack: move, fill (an empty stack of that name), moved-before, or
    conflict (the note says why)."""
    if target is None:
        return "move", ""
    if target.manifest_time is None and target.resource_count == 0:
        return "fill", "the team's stack of that name was created and never deployed"
    if marker is not None and marker.get("from") == origin:
        if marker.get("manifest_time") == source.manifest_time:
            return "moved-before", f"already moved ({marker.get('moved_at', '?')})"
        return "conflict", (
            f"it was moved from here ({marker.get('moved_at', '?')}), and the folder's copy was "
            f"deployed to again after that (update of {source.manifest_time}): two copies of one "
            "stack's state now differ"
        )
    if (target.manifest_time, target.resource_count) == (
        source.manifest_time,
        source.resource_count,
    ):
        return "moved-before", "already there (the same update)"
    return "conflict", (
        f"the team's backend holds another stack of that name (last update {target.manifest_time}, "
        f"{target.resource_count} resources; the folder's: {source.manifest_time}, "
        f"{source.resource_count})"
    )


RESEALED, NO_STAMP, UNOPENED = "resealed", "no stamp", "unopened"


def reseal_stamp(deployment: Mapping[str, Any], old: str, new: str) -> str:
    """Seal the stamp's outputs (in the root stack resource's `_stackflow` output) again under
    `new`: RESEALED; NO_STAMP for a stack stackflow never stamped; UNOPENED (left as it is) when
    `old` does not open the seal."""
    for resource in deployment.get("resources") or []:
        if resource.get("type") != "pulumi:pulumi:Stack" or resource.get("parent"):
            continue
        stamp = (resource.get("outputs") or {}).get(INTERNAL_OUTPUT)
        if not isinstance(stamp, dict) or "sealed" not in stamp or "fingerprint" not in stamp:
            return NO_STAMP
        fingerprint = str(stamp["fingerprint"])
        try:
            values = StampSeal(old, fingerprint).open(str(stamp["sealed"]))
        except ValueError:
            return UNOPENED
        sealer = StampSeal(new, fingerprint)
        stamp["sealed"], stamp["salt"] = sealer.seal(values), sealer.salt
        return RESEALED
    return NO_STAMP


def count_secrets(value: Any) -> int:
    """How many secret values a deployment holds."""
    if isinstance(value, Mapping):
        if SECRET_SIG in value:
            return 1
        return sum(count_secrets(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_secrets(v) for v in value)
    return 0


def _check_opens(plans: list[_Plan], source: Source) -> None:
    wrong = [
        p.name
        for p in plans
        if (salt := passphrase_salt(p.source.secrets_provider)) is not None
        and not passphrase_opens(salt, source.passphrase)
    ]
    if wrong:
        raise TeamOpsRefused(
            f"the passphrase from {source.passphrase_from} does not open {', '.join(wrong)} in "
            f"{source.folder}: give the one those stacks were deployed with. Nothing was changed."
        )


def plan_moves(
    source: Source, target_url: str, team_records: Records
) -> tuple[list[_Plan], list[_Plan]]:
    """(what to do per stack, the conflicts), read from both backends and the team's records."""
    todo: list[_Plan] = []
    conflicts: list[_Plan] = []
    origin = str(source.folder)
    with CheckpointReader(source.backend_url) as mine, CheckpointReader(target_url) as theirs:
        for project, stack in mine.all_stacks():
            found = mine.checkpoint(project, stack)
            if found is None or found.manifest_time is None:
                continue  # created and never deployed: nothing to move
            marker = team_records.get(f"{MOVED}/{project}/{stack}")
            action, note = decide(
                found,
                theirs.checkpoint(project, stack),
                marker.value if marker is not None else None,
                origin,
            )
            (conflicts if action == "conflict" else todo).append(
                _Plan(project, stack, found, action, note)
            )
    return todo, conflicts


def move_state(
    settings: Settings, source: Source, say: Callable[[str], object] = lambda _l: None
) -> MoveReport:
    """Move every stack and record of `source` into the team's backend and records store.

    Raises:
        TeamOpsRefused: no team backend, a passphrase that does not open the folder's stacks, or
            a team stack of the same name that is another stack; nothing was changed.
        StateTransferError: a `pulumi` command failed (what moved before it is said; run again).
        RecordsError, StateBackendUnavailable: a store did not answer.
    """
    from stackflow.backends.file import FileRecords
    from stackflow.environment_records import records_of
    from stackflow.records.projects import project_records
    from stackflow.secretbox import state_passphrase

    target_url = _team_backend(settings)
    uses_passphrase = settings.secrets_provider in (None, "passphrase")
    team_passphrase = state_passphrase(settings) if uses_passphrase else None
    report = MoveReport(
        str(source.folder), mask_url(target_url), mask_url(settings.resolved_records_url)
    )
    team_records = records_of(settings)
    try:
        todo, conflicts = plan_moves(source, target_url, team_records)
        if conflicts:
            raise TeamOpsRefused(
                "; ".join(f"{p.name}: {p.note}" for p in conflicts)
                + ". Remove the team's stack first (`pulumi stack rm` on the team's backend) if it "
                "is the one to replace, or move the folder into another backend. Nothing was "
                "changed."
            )
        _check_opens(todo, source)
        _move_stacks(settings, source, target_url, team_passphrase, todo, team_records, report, say)
        old_records = project_records(FileRecords(source.records), settings.project)
        for key in old_records.list():
            if key == HEAD_KEY:  # the head of the folder's own audit log, which stays there
                continue
            report.records.append((key, _move_record(old_records, team_records, key)))
    finally:
        team_records.close()
    return report


def _move_stacks(
    settings: Settings,
    source: Source,
    target_url: str,
    team_passphrase: str | None,
    todo: list[_Plan],
    team_records: Records,
    report: MoveReport,
    say: Callable[[str], object],
) -> None:
    from stackflow.engine.automation.transfer import BackendSession, StackRef

    redactor = Redactor([source.passphrase, *([team_passphrase] if team_passphrase else [])])
    home = cli_home(settings)
    old = BackendSession(source.backend_url, source.passphrase, pulumi_home=home, redactor=redactor)
    new = BackendSession(
        target_url,
        team_passphrase,
        secrets_provider=settings.secrets_provider or "passphrase",
        pulumi_home=home,
        redactor=redactor,
    )
    with old, new:
        for plan in todo:
            if plan.action == "moved-before":
                report.stacks.append((plan.name, plan.note))
                continue
            ref = StackRef(plan.project, plan.stack)
            exported = old.export(ref)
            secrets = count_secrets(exported.deployment)
            stamp = UNOPENED
            if team_passphrase is not None:
                stamp = reseal_stamp(exported.deployment, source.passphrase, team_passphrase)
            if plan.action == "fill":
                new.remove_empty(ref)
            exported.deployment["secrets_providers"] = new.create(ref)
            new.import_(ref, exported)
            team_records.put(
                f"{MOVED}/{plan.project}/{plan.stack}",
                {
                    "from": str(source.folder),
                    "manifest_time": plan.source.manifest_time,
                    "moved_at": _now(),
                },
                expect_version=None,
            )
            said = {
                RESEALED: "stamp sealed again: its next run may skip it",
                NO_STAMP: "no stackflow stamp",
                UNOPENED: "stamp not sealed again: its next up runs once",
            }[stamp]
            report.stacks.append(
                (plan.name, f"moved ({secrets} secret(s) encrypted for the team; {said})")
            )
            say(f"stack {plan.name}: {report.stacks[-1][1]}")


def _move_record(old: Records, team: Records, key: str) -> str:
    """Create the record in the team's store unless it has one; what happened."""
    found = old.get(key)
    if found is None:
        return "gone from the folder meanwhile"
    try:
        team.put(key, found.value, expect_version=ABSENT)
        return "moved"
    except RecordConflict:
        theirs = team.get(key)
        if theirs is not None and theirs.value == found.value:
            return "already there"
        return "kept the team's (it differs from the folder's)"


def cli_home(settings: Settings) -> Path | None:
    """The Pulumi home a team operation's CLI uses: the local cloud's own (its plugins), else
    the user's (None)."""
    if settings.cloud != "local":
        return None
    from stackflow.localcloud.paths import pulumi_home

    return pulumi_home(settings.localcloud_root)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
