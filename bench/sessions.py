"""The servers a benchmark run needs (a Prefect server and a local cloud server on free loopback
ports) and the project whose environment files say what each benchmark environment deploys.
Everything deploys to the **local cloud** (moto on loopback), never AWS."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit import REGION, ROOT, say

from stackflow.localprefect import drain_prefect_queues
from stackflow.processes import free_port

# --- the project the benchmarks deploy: environment files, never variables ------------------------

KINDS = ("dev", "staging", "prod", "ephemeral")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


def environment_toml(kind: str, sections: Mapping[str, Any]) -> str:
    """An environment file: its kind, the local cloud, the bench's region, then `sections`
    (top-level keys as values, sections as dicts; an empty section is left out)."""
    top: dict[str, Any] = {"kind": kind, "cloud": "local"}
    top |= {k: v for k, v in sections.items() if not isinstance(v, Mapping)}
    tables: dict[str, dict[str, Any]] = {"aws": {"region": REGION}}
    for name, values in sections.items():
        if isinstance(values, Mapping):
            tables[name] = {**tables.get(name, {}), **values}
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    for name, values in tables.items():
        if values:
            lines += [f"[{name}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    return "\n".join(lines) + "\n"


def bench_project(folder: Path) -> Path:
    """A project folder for the bench's runs, as tests/realenv.test_project makes one: the
    repository's stackflow.toml and migrations, and a template per kind (the local cloud, the
    bench's region), so any name (ours-a, plain-a, bench-task) deploys its kind's defaults.
    Session.template and Session.declare change what they deploy."""
    templates = folder / "environments" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        (templates / f"{kind}.toml").write_text(environment_toml(kind, {}))
    (folder / "stackflow.toml").write_text((ROOT / "stackflow.toml").read_text())
    if not (folder / "migrations").exists():
        (folder / "migrations").symlink_to(ROOT / "migrations")
    return folder


# --- the servers a run needs ----------------------------------------------------------------------


@dataclass
class Session:
    """A Prefect server and a local cloud server, both on free loopback ports, the project whose
    environment files say what the bench deploys, and this machine's settings every measured
    process gets (its own state folder comes on top)."""

    folder: Path
    prefect_api_url: str
    prefect_pid: int | None
    cloud_url: str
    cloud_root: Path
    cloud_port: int
    cloud_pid: int
    project: Path

    def template(self, kind: str, **sections: Any) -> Path:
        """What every environment of `kind` without a file of its own deploys, e.g.
        `template("dev", network={"nat_gateway": True})`."""
        path = self.project / "environments" / "templates" / f"{kind}.toml"
        path.write_text(environment_toml(kind, sections))
        return path

    def declare(self, environment: str, **sections: Any) -> Path:
        """Write (or rewrite) `environment`'s own file: what every later run of it deploys, e.g.
        `declare("ours-a", app={"desired_count": 2})`. Its kind follows the name."""
        from stackflow.settings import kind_of

        path = self.project / "environments" / f"{environment}.toml"
        path.write_text(environment_toml(kind_of(environment).value, sections))
        return path

    def env(self, state_dir: Path | None = None, **extra: str) -> dict[str, str]:
        """Environment of a measured process: the user's, minus any STACKFLOW_/PULUMI_/AWS_/
        PREFECT_ settings, plus the session's project and servers, a HOME of its own (the user's
        ~/.pulumi stays untouched) and the Pulumi CLI cache setup.sh filled. `extra` are more
        variables of this machine; what an environment deploys is its file's (`declare`)."""
        from stackflow.pulumi_cli import cache_root

        prefixes = ("STACKFLOW_", "PULUMI_", "AWS_", "PREFECT_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
        home = self.folder / "home"
        (home / ".pulumi").mkdir(parents=True, exist_ok=True)
        env.update(
            {
                "HOME": str(home),
                "STACKFLOW_CACHE_DIR": str(cache_root()),
                "STACKFLOW_PROJECT_DIR": str(self.project),
                "STACKFLOW_LOCALCLOUD_DIR": str(self.cloud_root),
                "STACKFLOW_LOCALCLOUD_PORT": str(self.cloud_port),
                "PREFECT_API_URL": self.prefect_api_url,
                "PREFECT_HOME": str(self.folder / "prefect-client"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if state_dir is not None:
            env["STACKFLOW_STATE_DIR"] = str(state_dir)
        env.update(extra)
        return env

    def set_latency(self, latency_s: Mapping[str, float]) -> None:
        """The local cloud's latency knobs, for every process that deploys on it."""
        from stackflow.localcloud.knobs import set_knobs

        set_knobs(self.cloud_url, {"latency_s": dict(latency_s)})


@contextlib.contextmanager
def session(folder: Path) -> Iterator[Session]:
    """Start a Prefect server (SQLite, no UI) and a local cloud server (with its data plane) on
    free ports under `folder`, make the bench's project there (see `bench_project`), and stop
    both servers (and the cloud's databases) afterwards.

    The cloud is started here, not by a measured process, so it is no descendant of one and its
    memory is never counted as theirs. PREFECT_API_URL in the environment is ignored: a fresh
    server keeps earlier runs' rows out of the figures.
    """
    from stackflow.localcloud.paths import cloud_root
    from stackflow.localcloud.server import ensure_cloud, stop_cloud
    from stackflow.localprefect import start_prefect_server, stop_prefect_server

    folder.mkdir(parents=True, exist_ok=True)
    project = bench_project(folder / "project")
    started = time.monotonic()
    prefect = start_prefect_server(folder / "prefect-server", free_port(), ui=False)
    say(f"Prefect server {prefect.url} healthy after {time.monotonic() - started:.1f}s")
    root = cloud_root(folder / "cloud-state")
    try:
        started = time.monotonic()
        cloud = ensure_cloud(root, free_port(), region=REGION, say=lambda _line: None)
        say(f"local cloud {cloud.url} ready after {time.monotonic() - started:.1f}s")
        try:
            yield Session(
                folder,
                prefect.api_url,
                prefect.pid,
                cloud.url,
                cloud.root,
                cloud.port,
                cloud.pid,
                project,
            )
        finally:
            stop_cloud(root)
    finally:
        drain_prefect_queues()
        stop_prefect_server(prefect.pid)
