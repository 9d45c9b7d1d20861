"""A record per environment, kept with stackflow's records beside the Pulumi state: its kind, the
cloud it lives on, when its first deploy began (an ephemeral environment's TTL counts from
there, so one whose first deploy failed half-way is still cleaned up), its last successful
deploy, and the stackflow version that wrote it.

Every worker reads the same records (see `stackflow.records`); writes are compare-and-set, so
two runs recording one environment at once never lose each other's update.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from stackflow import __version__
from stackflow.backends import open_records
from stackflow.config.protection import Protection
from stackflow.errors import SettingsError
from stackflow.records import DamagedRecord, Records, update
from stackflow.records.projects import project_records
from stackflow.settings import EnvironmentKind, Settings

PREFIX = "environments/"


@dataclass(frozen=True)
class EnvironmentRecord:
    name: str
    kind: str
    cloud: str
    created: float  # when its first deploy began (before any resource was created)
    ttl_hours: float | None = None  # ephemeral environments only
    deployed: float | None = None  # its last successful `up`
    status: str = "deploying"  # deploying, deployed, failed, destroyed
    stackflow: str = __version__  # the version that last wrote the record
    extra: dict[str, Any] = field(default_factory=dict)  # what later features record

    def expired(self, now: float | None = None) -> bool:
        if self.kind != EnvironmentKind.EPHEMERAL.value or self.ttl_hours is None:
            return False
        return (now or time.time()) >= self.created + self.ttl_hours * 3600

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> EnvironmentRecord:
        known = {k: value[k] for k in cls.__dataclass_fields__ if k in value}
        known.setdefault("cloud", "local")
        return cls(**known)


def records_of(settings: Settings) -> Records:
    """This project's records (see `Settings.resolved_records_url`), keyed by the project as its
    Pulumi state is, so projects sharing a store stay apart (`stackflow.records.projects`)."""
    return project_records(open_records(settings.resolved_records_url), settings.project)


def _key(name: str) -> str:
    return PREFIX + name


def read(records: Records, name: str) -> EnvironmentRecord | None:
    found = records.get(_key(name))
    return None if found is None else EnvironmentRecord.from_value(found.value)


def _update(records: Records, name: str, change: Any, create: EnvironmentRecord | None) -> None:
    """Apply `change(record) -> record` with compare-and-set, creating `create` if absent."""

    def changed(value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None if create is None else asdict(change(create))
        return asdict(change(EnvironmentRecord.from_value(value)))

    update(records, _key(name), changed)


def _new(settings: Settings) -> EnvironmentRecord:
    ephemeral = settings.environment_kind is EnvironmentKind.EPHEMERAL
    return EnvironmentRecord(
        settings.environment,
        settings.environment_kind.value,
        settings.cloud,
        time.time(),
        settings.ttl_hours if ephemeral else None,
    )


def record_attempt(records: Records, settings: Settings) -> bool:
    """Before an `up` creates anything: remember the environment (its creation time is kept).
    Returns whether this call created the record (`forget_if_empty` may take it back)."""
    existed = records.get(_key(settings.environment)) is not None
    _update(
        records,
        settings.environment,
        lambda r: r if r.status == "deployed" else replace(r, status="deploying"),
        _new(settings),
    )
    return not existed


def record_outcome(records: Records, settings: Settings, succeeded: bool) -> None:
    """After an `up`: deployed (with its time) or failed. A successful one also records the
    protection the file gave (the next runs follow the stronger of it and their file), with the
    reason when it lowered what was recorded before; every one records the policy packs it was
    checked with and the rules turned off there, with why (`extra["policy"]`)."""
    now = time.time()
    policies = settings.policies

    def change(r: EnvironmentRecord) -> EnvironmentRecord:
        extra = {k: v for k, v in r.extra.items() if k != "policy"}
        if policies is not None:
            extra["policy"] = policies.as_dict()
        if succeeded:
            before = Protection.from_dict(extra.get("protection"))
            given = settings.file_protection
            extra["protection"] = given.as_dict()
            lowered = given.lowered_from(before)
            if lowered:
                extra["unprotected"] = {
                    "at": now,
                    "lowered": lowered,
                    "reason": settings.approval.unprotect or "",
                }
        return replace(
            r,
            status="deployed" if succeeded else "failed",
            deployed=now if succeeded else r.deployed,
            stackflow=__version__,
            extra=extra,
        )

    _update(records, settings.environment, change, _new(settings))


def recorded_protection(records: Records, name: str) -> Protection | None:
    """The protection the environment's last successful `up` recorded (None: never deployed)."""
    record = read(records, name)
    return None if record is None else Protection.from_dict(record.extra.get("protection"))


def guard_environment(settings: Settings, records: Records | None = None) -> Settings:
    """The checks every run of an environment makes before anything starts, and its settings
    guarded by the protection its last successful `up` recorded.

    Raises:
        CloudMismatch: deployed on the other cloud.
        SharedBackend: a protected environment on a backend review branches deploy to.
        ProtectionLowered: a prod or prod-* environment's file lowers its protection without
            `[approval] unprotect` (nothing is changed).
    """
    store = records or records_of(settings)
    check_cloud(settings, store)
    guarded = settings.with_recorded_protection(recorded_protection(store, settings.environment))
    if guarded.protected:
        check_protected_backend(store, settings.environment)
    return guarded


def forget(records: Records, name: str) -> None:
    """The environment is gone: it may be deployed anywhere (any cloud) next."""
    found = records.get(_key(name))
    if found is not None:
        records.delete(_key(name), expect_version=None)


def environment_names(records: Records) -> list[str]:
    """The names of the environments recorded, sorted (nothing read but the keys)."""
    return [key.removeprefix(PREFIX) for key in records.list(PREFIX)]


def list_environments(records: Records) -> list[EnvironmentRecord]:
    """Every environment recorded; a damaged record is passed over (`status` names it)."""
    found = []
    for name in environment_names(records):
        with contextlib.suppress(DamagedRecord):
            record = read(records, name)
            if record is not None:
                found.append(record)
    return found


_CLOUD_WORDS = {"local": "the local cloud (moto on loopback)", "aws": "AWS"}


class CloudMismatch(SettingsError):
    """An environment deployed on one cloud was asked for on the other."""


def check_cloud(settings: Settings, records: Records | None = None) -> None:
    """Refuse to act on an environment deployed on another cloud than the one settings target.

    Raises:
        CloudMismatch: naming the environment, both clouds and what to do; nothing is changed.
    """
    store = records or records_of(settings)
    record = read(store, settings.environment)
    if record is None or record.cloud == settings.cloud:
        return
    deployed_on = record.cloud
    file = settings.source.environment_file or "its environment file"
    if "cloud" in settings.source.overrides:  # --cloud, or the flow's cloud parameter
        where = f"--cloud {settings.cloud}, or the flow's cloud parameter"
    else:
        where = f'cloud = "{settings.cloud}" in {file}'
    raise CloudMismatch(
        f"environment {settings.environment!r} is deployed on "
        f"{_CLOUD_WORDS.get(deployed_on, deployed_on)}, and this run targets "
        f"{_CLOUD_WORDS.get(settings.cloud, settings.cloud)} ({where}). "
        f"Run it with --cloud {deployed_on} (the flow's cloud parameter), or set "
        f'cloud = "{deployed_on}" in {file} (destroy it there first to move it), or use '
        "another environment name. Nothing was changed."
    )


class SharedBackend(SettingsError):
    """Review branches' runs and protected environments were found on one backend."""


_TRUST_DOC = "docs/operations/trust-model.md"


def _guarded(record: EnvironmentRecord) -> bool:
    """Prod's state: its kind, or the protection its last up recorded, says so."""
    recorded = Protection.from_dict(record.extra.get("protection"))
    prod = EnvironmentKind.PROD.value
    return record.kind == prod or bool(
        recorded and (recorded.kind == prod or recorded.confirm_destroy)
    )


def check_review_backend(records: Records) -> None:
    """Refuse to run review branches' code on a backend that holds a protected environment: that
    code runs with what the worker holds (this backend, its passphrase, its credentials).

    Raises:
        SharedBackend: naming the protected environments and where the records are.
    """
    protected = sorted(r.name for r in list_environments(records) if _guarded(r))
    if protected:
        raise SharedBackend(
            f"review branches run their own code with what this worker holds, and its backend "
            f"({records.where}) holds protected environment(s) {', '.join(protected)}: run "
            f"review, ephemeral and cleanup runs on a worker of their own with a backend of "
            f"their own ({_TRUST_DOC}). Nothing was run."
        )


def check_protected_backend(records: Records, environment: str) -> None:
    """Refuse to deploy a protected environment on a backend review branches deploy to.

    Raises:
        SharedBackend: naming the review environments and where the records are.
    """
    from stackflow.gitops.sync import PREFIX as SYNC_PREFIX

    review = sorted(
        key.removeprefix(SYNC_PREFIX)
        for key in records.list(SYNC_PREFIX)
        if (found := records.get(key)) is not None and found.value.get("review")
    )
    if review:
        raise SharedBackend(
            f"{environment} is protected, and its backend ({records.where}) also holds review "
            f"environment(s) {', '.join(review[:5])}, whose branches' code runs with that "
            f"backend's access: give review runs a worker and a backend of their own "
            f"({_TRUST_DOC}). Nothing was changed."
        )
