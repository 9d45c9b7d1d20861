"""From `git push` to the deploy's first engine call, with the shipped post-receive hook and
without it (the poll finds the commit), through the **real engine** on the **local cloud** (moto
on loopback; nothing reaches AWS).

A bare repository here holds this project (every file git would commit) and an environment file
that follows main; `deployments/serve.py`'s GitOps deployments for that environment are served
in a process of their own (gitops/poll every 60 s, sync/<env> on push events). After a first
deploy of the whole environment, each measured commit changes the app's task count only, so the
deploy's first engine call is the app stack's update; its start is Pulumi's own record of it
(the update's startTime, whole seconds). Results go under `push_to_first_engine_call` of the
`gitops_polling` key of bench/results.json.

    .venv/bin/python bench/gitops_push_deploy.py [--hooked 2] [--unhooked 2]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import RESULTS, ROOT, merge_results, run_metadata, say
from gitops_rig import INTERVAL_S, RUNNER_POLL_S, git, hook_up, push, serving, wait_served
from sessions import environment_toml, session

KEY = "gitops_polling"
ENVIRONMENT = "dev-push"
DEPLOY_TIMEOUT_S = 900.0


def project_files() -> list[str]:
    """What a commit of this project holds: the files git would commit from this checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [f for f in listed if (ROOT / f).is_file()]


def environment_file(origin: Path, count: int) -> str:
    return environment_toml(
        "dev",
        {"git": {"branch": "main", "repository": str(origin)}, "app": {"desired_count": count}},
    )


def app_updates(state: Path) -> list[dict[str, Any]]:
    """Pulumi's own record of each finished update of the app stack, oldest first."""
    folder = state / "pulumi-local" / ".pulumi" / "history" / "stackflow-app" / ENVIRONMENT
    found = [json.loads(p.read_text()) for p in folder.glob("*.history.json")]
    return sorted(found, key=lambda r: r["startTime"])


def wait_for_update(state: Path, seen: int, timeout: float = DEPLOY_TIMEOUT_S) -> dict[str, Any]:
    """The app stack's next finished update after the `seen` ones."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        updates = app_updates(state)
        if len(updates) > seen:
            return updates[seen]
        time.sleep(1)
    raise RuntimeError(f"no update of the app stack within {timeout:.0f}s")


def wait_idle(state: Path, timeout: float = DEPLOY_TIMEOUT_S) -> None:
    """Until the environment's sync record says no attempt is running."""
    from stackflow.environment_records import records_of
    from stackflow.gitops import sync
    from stackflow.settings import get_settings

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = sync.read(records_of(get_settings(ENVIRONMENT, strict=False)), ENVIRONMENT)
        attempted = record.get("attempted") or {}
        if attempted and attempted.get("result") != sync.Result.RUNNING:
            return
        time.sleep(1)
    raise RuntimeError(f"the sync of {ENVIRONMENT} did not end within {timeout:.0f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hooked", type=int, default=2, help="pushes through the hook")
    parser.add_argument("--unhooked", type=int, default=2, help="pushes the poll must find")
    args = parser.parse_args(argv)
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="stackflow-bench-gitops-deploy-"))
    samples: list[dict[str, Any]] = []
    try:
        with session(folder) as s:
            import os

            from prefect.settings import PREFECT_API_URL, temporary_settings

            state = folder / "state"
            origin, work = folder / "origin.git", folder / "work"
            git(folder, "init", "-q", "--bare", "-b", "main", str(origin))
            git(folder, "clone", "-q", str(origin), str(work))
            for name in project_files():
                (work / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, work / name)
            git_section = f'\n[git]\nrepository = "{origin}"\n'
            (s.project / "stackflow.toml").write_text(
                (s.project / "stackflow.toml").read_text() + git_section
            )
            (work / "stackflow.toml").write_text((s.project / "stackflow.toml").read_text())
            shutil.copy2(ROOT / "constraints.txt", s.project / "constraints.txt")
            env_path = f"environments/{ENVIRONMENT}.toml"
            (s.project / env_path).write_text(environment_file(origin, 1))
            env = s.env(state, STACKFLOW_RETRY_DELAY_S="0")
            os.environ.update({k: v for k, v in env.items() if k.startswith("STACKFLOW_")})
            with (
                temporary_settings(updates={PREFECT_API_URL: s.prefect_api_url}),
                serving(env, "after", folder / "serve.log"),
            ):
                wait_served(2, folder / "serve.log")
                hook_up(origin, s.prefect_api_url)
                say("the first deploy of the whole environment (not measured)")
                push(work, "refs/heads/main", {env_path: environment_file(origin, 1)})
                wait_for_update(state, 0)
                wait_idle(state)
                count = 1
                for hooked in [True] * args.hooked + [False] * args.unhooked:
                    hook_up(origin, s.prefect_api_url if hooked else None)
                    if not hooked:
                        time.sleep(random.uniform(0, INTERVAL_S))  # any phase of the poll
                    seen, count = len(app_updates(state)), 3 - count
                    pushed, told = push(
                        work, "refs/heads/main", {env_path: environment_file(origin, count)}
                    )
                    assert ("stackflow: told Prefect" in told) == hooked, told
                    update = wait_for_update(state, seen)
                    wait_idle(state)
                    waited = update["startTime"] - pushed.timestamp()
                    samples.append(
                        {"hook": hooked, "push_to_first_engine_call_s": round(waited, 1)}
                    )
                    say(
                        f"{'hook' if hooked else 'poll'}: first engine call {waited:.1f}s after the push"
                    )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    figures = {
        "samples": samples,
        "interval_s": INTERVAL_S,
        "runner_poll_s": RUNNER_POLL_S,
        "measured_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "wall_s": round(time.monotonic() - started),
        "load_average_1m": run_metadata()["load_average_1m"],
    }
    for hooked, label in ((True, "with_hook_s"), (False, "without_hook_s")):
        values = sorted(x["push_to_first_engine_call_s"] for x in samples if x["hook"] is hooked)
        if values:
            figures[label] = {"median": values[len(values) // 2], "max": values[-1]}
    print(json.dumps(figures, indent=2))
    current = json.loads(RESULTS.read_text()).get(KEY, {}) if RESULTS.exists() else {}
    merge_results({KEY: {**current, "push_to_first_engine_call": figures}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
