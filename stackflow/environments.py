"""A record per deployed environment (kind, when first deployed, TTL), for the cleanup of ephemeral ones."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from stackflow.errors import SettingsError
from stackflow.settings import EnvironmentKind, Settings


@dataclass(frozen=True)
class EnvironmentRecord:
    name: str
    kind: str
    created: float
    ttl_hours: float | None
    cloud: str | None = None  # "local" or "aws"; None in records written before there were clouds

    def expired(self, now: float | None = None) -> bool:
        if self.kind != EnvironmentKind.EPHEMERAL.value or self.ttl_hours is None:
            return False
        return (now or time.time()) >= self.created + self.ttl_hours * 3600


def _dir(state_dir: Path) -> Path:
    return state_dir / "environments"


def record_deploy(settings: Settings) -> EnvironmentRecord:
    """Remember an environment at its first successful deploy (later deploys keep the first time)."""
    path = _dir(settings.state_dir) / f"{settings.environment}.json"
    if path.exists():
        return EnvironmentRecord(**json.loads(path.read_text()))
    ephemeral = settings.environment_kind is EnvironmentKind.EPHEMERAL
    record = EnvironmentRecord(
        settings.environment,
        settings.environment_kind.value,
        time.time(),
        settings.ttl_hours if ephemeral else None,
        settings.cloud,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(record)))
    tmp.replace(path)
    return record


_CLOUD_WORDS = {"local": "the local cloud (moto on loopback)", "aws": "AWS"}


def check_cloud(settings: Settings) -> None:
    """Refuse to act on an environment deployed on another cloud than the one settings target.

    Raises:
        CloudMismatch: naming the environment, both clouds and what to do; nothing is changed.
    """
    path = _dir(settings.state_dir) / f"{settings.environment}.json"
    if not path.exists():
        return
    deployed_on = json.loads(path.read_text()).get("cloud")
    if deployed_on and deployed_on != settings.cloud:
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


class CloudMismatch(SettingsError):
    """An environment deployed on one cloud was asked for on the other."""


def list_environments(state_dir: Path) -> list[EnvironmentRecord]:
    folder = _dir(state_dir)
    if not folder.exists():
        return []
    return [EnvironmentRecord(**json.loads(p.read_text())) for p in sorted(folder.glob("*.json"))]


def forget(state_dir: Path, name: str) -> None:
    (_dir(state_dir) / f"{name}.json").unlink(missing_ok=True)
