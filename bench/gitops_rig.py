"""What the GitOps benchmarks share (bench/gitops_polling.py, bench/gitops_push_deploy.py): a bare
repository here with a branch per environment, the project whose environment files follow them,
records as deploys leave them, `deployments/serve.py`'s GitOps deployments served in a process of
their own (`python bench/gitops_rig.py _serve after|before`), and readers of what a Prefect server
and a process tree spent (its SQLite database, flow runs by flow, CPU from /proc)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import ROOT

HOOK = ROOT / "scripts" / "git_hooks" / "post_receive.py"
INTERVAL_S = 60  # the shortest interval the settings accept: the poll's worst case
RUNNER_POLL_S = 10  # PREFECT_RUNNER_POLL_FREQUENCY, Prefect's default: the worker's poll interval
_TICKS = os.sysconf("SC_CLK_TCK")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "PATH": "/usr/bin:/bin",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, env=GIT_ENV
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip() + done.stderr.strip()


def names(count: int) -> list[str]:
    return [f"dev-g{i:03d}" for i in range(count)]


def branch_of(environment: str) -> str:
    return f"env/{environment.removeprefix('dev-g')}"


# --- what is measured -------------------------------------------------------------------------


def tree_cpu_s(root: int) -> float:
    """CPU seconds of a process and every descendant, alive or reaped by one of them."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)], stats[int(entry.name)] = int(fields[1]), fields
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        grown, tree = bool(more), tree | more
    total = sum(sum(int(stats[p][i]) for i in (11, 12, 13, 14)) for p in tree if p in stats)
    return total / _TICKS


def database(home: Path) -> dict[str, int]:
    """The Prefect server's SQLite database: bytes on disk (with its WAL) and rows that grow."""
    [path] = list(home.rglob("prefect.db"))
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
        rows = {
            table: int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("flow_run", "flow_run_state", "log", "events", "event_resources")
        }
    return {"bytes": size, **rows}


def flow_runs_by_flow(after: datetime) -> dict[str, int]:
    """Flow runs created since `after`, by flow name (scheduled ahead ones included)."""
    from prefect.client.orchestration import get_client

    counts: dict[str, int] = {}
    with get_client(sync_client=True) as client:
        flows = {f.id: f.name for f in client.read_flows()}
        offset = 0
        while True:
            page = client.read_flow_runs(limit=200, offset=offset)
            for run in page:
                if run.created and run.created >= after:
                    name = flows.get(run.flow_id, "?")
                    counts[name] = counts.get(name, 0) + 1
            if len(page) < 200:
                return counts
            offset += 200


# --- the setup ---------------------------------------------------------------------------------


def make_repository(folder: Path, environments: list[str]) -> tuple[Path, Path]:
    """A bare repository with one branch per environment at one commit, and a working copy."""
    origin, work = folder / "origin.git", folder / "work"
    git(folder, "init", "-q", "--bare", "-b", "main", str(origin))
    git(folder, "clone", "-q", str(origin), str(work))
    (work / "README.md").write_text("refs for the GitOps benchmark\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "first")
    git(work, "push", "-q", "origin", *(f"HEAD:refs/heads/{branch_of(e)}" for e in environments))
    return origin, work


def make_project(folder: Path, origin: Path, environments: list[str]) -> Path:
    project = folder / "project"
    (project / "environments").mkdir(parents=True)
    (project / "stackflow.toml").write_text(
        (ROOT / "stackflow.toml").read_text() + f'\n[git]\nrepository = "{origin}"\n'
    )
    for env in environments:
        (project / "environments" / f"{env}.toml").write_text(
            f'kind = "dev"\ncloud = "local"\n\n[git]\nbranch = "{branch_of(env)}"\n'
            f"interval_s = {INTERVAL_S}\n"
        )
    return project


def seed_records(environments: list[str], head: str) -> None:
    """Each environment deployed at `head`, as a sync that deployed it leaves the records."""
    from stackflow.environment_records import record_attempt, record_outcome, records_of
    from stackflow.gitops import sync
    from stackflow.settings import get_settings

    for env in environments:
        settings = get_settings(env, strict=False)
        records = records_of(settings)
        record_attempt(records, settings)
        record_outcome(records, settings, succeeded=True)
        sync.note_seen(records, env, head, {"branch": branch_of(env)})
        sync.begin(records, env, head, {"sync_run": None}, sync.read(records, env))
        sync.finish(records, env, head, sync.Result.SUCCEEDED, "deployed", INTERVAL_S)


@contextmanager
def serving(env: dict[str, str], design: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """This script's `_serve` in a process of its own (its own process group), stopped after."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, __file__, "_serve", design],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def serve_gitops(design: str) -> None:
    """Serve the GitOps deployments of every declared environment: `after` as
    deployments/serve.py builds them (gitops/poll + sync/<env> on push events), `before` as it
    built them until now (sync/<env> each on its own interval, no poll, no events)."""
    from datetime import timedelta

    from prefect.schedules import Interval

    from deployments.serve import build_deployments, serve_bounded
    from flows.sync import sync_environment

    if design == "after":
        chosen = [d for d in build_deployments() if d.flow_name in ("gitops", "sync")]
    else:
        from stackflow.settings import declared_environments, get_settings

        project = Path(os.environ["STACKFLOW_PROJECT_DIR"])
        chosen = [
            sync_environment.to_deployment(  # type: ignore[misc]
                name=env,
                parameters={"environment": env},
                schedules=[Interval(timedelta(seconds=get_settings(env).git.interval_s))],
            )
            for env in declared_environments(project)
        ]
    serve_bounded(chosen, limit=8)


def wait_served(count: int, log: Path, timeout: float = 600) -> None:
    """Until `count` deployments are registered and polled by the runner."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            polled = [d for d in client.read_deployments(limit=200) if d.last_polled is not None]
            offset = 200
            while len(polled) < count:
                page = client.read_deployments(limit=200, offset=offset)
                if not page:
                    break
                polled += [d for d in page if d.last_polled is not None]
                offset += 200
            if len(polled) >= count:
                return
            time.sleep(2)
    raise RuntimeError(
        f"{count} deployments not served in {timeout:.0f}s:\n{log.read_text()[-3000:]}"
    )


def first_sync_run(environment: str, after: datetime, timeout: float) -> Any:
    """The first sync run of `environment` created after `after`, once it is running."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[environment]))
            )
            begun = [r for r in runs if r.created >= after and r.start_time is not None]
            if begun:
                run = min(begun, key=lambda r: r.created)
                states = client.read_flow_run_states(run.id)
                return run, states
            time.sleep(0.1)
    raise RuntimeError(f"no sync run of {environment} began within {timeout:.0f}s")


def push(work: Path, ref: str, files: dict[str, str]) -> tuple[datetime, str]:
    """Write `files`, commit them and push to `ref`; when the push began, and what the pusher was
    told (the hook's lines)."""
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "--allow-empty", "-m", f"bench: {', '.join(files) or 'nothing'}")
    pushed = datetime.now(UTC)
    return pushed, git(work, "push", "origin", f"HEAD:{ref}")


def hook_up(origin: Path, api_url: str | None) -> None:
    """Install the shipped post-receive hook pointed at `api_url` (None: take it out)."""
    hook = origin / "hooks" / "post-receive"
    if api_url is None:
        hook.unlink(missing_ok=True)
        return
    hook.write_bytes(HOOK.read_bytes())
    hook.chmod(0o755)
    git(origin, "config", "stackflow.prefectApiUrl", api_url)


if __name__ == "__main__" and sys.argv[1:2] == ["_serve"]:
    serve_gitops(sys.argv[2])
