"""The baseline: multi-stack deployment the way the Pulumi Automation API documents it.

A plain script, no Prefect, no fingerprints, no retries, no concurrency: for each environment in
turn, for networking, database and app in turn, `auto.create_or_select_stack(...)` with an inline
program from programs/, set the config, `stack.up()`, read the outputs and hand them to the next
stack by hand. Between database and app it runs the project's migrations on the new database (with
the project's own functions), and at the end it polls the app's URL until it answers, so it does
the same work as `python flows/run.py up`. `refresh` refreshes the three stacks one after another;
`destroy` destroys them in reverse order (app, database, networking).

It runs the same Pulumi CLI (found by path, like the engine), with the same Pulumi home (the
project's local-cloud plugins, installed with the project's function), on the same local cloud as
stackflow; only its file backend and workspaces are its own (under --work). Program arguments come
from the same settings stackflow reads (the environment's file in the project STACKFLOW_PROJECT_DIR
names, and this machine's STACKFLOW_* variables), through the graph's own argument builders, so
both deploy exactly the same resources. Everything it deploys goes to the **local cloud** (moto on
loopback), never AWS.

    .venv/bin/python bench/plain_automation.py up --env plain-a [--env plain-b ...] --work DIR
    .venv/bin/python bench/plain_automation.py refresh --env plain-a --work DIR
    .venv/bin/python bench/plain_automation.py destroy --env plain-a --work DIR
    .venv/bin/python bench/plain_automation.py graph --env plain-a --work DIR --out FILE

Timings go to --out (JSON): the wall time of the whole loop and of each stack operation. `graph`
writes each stack's resources with their types and dependencies instead (no values), for the
critical path of the injected latencies; it is not part of any timed run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
import pulumi.automation as auto
from pydantic import BaseModel

from graph import GRAPH
from programs.app import AppOutputs
from programs.database import DatabaseOutputs
from programs.networking import NetworkingOutputs
from stackflow.engine.automation import find_pulumi_cli
from stackflow.localcloud.install import install_plugins
from stackflow.localcloud.paths import pulumi_home
from stackflow.localcloud.plugin import ENDPOINT_ENV
from stackflow.localcloud.server import ensure_cloud
from stackflow.migrator.command import migrate
from stackflow.migrator.target import MysqlTarget
from stackflow.settings import Settings, get_settings

# The script's own passphrase for its own throwaway file backend; not a real secret.
PASSPHRASE = "plain-automation-bench"
STACKS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("networking", NetworkingOutputs),
    ("database", DatabaseOutputs),
    ("app", AppOutputs),
)
HEALTH_TIMEOUT_S = 120.0


def inline_program(program: Callable[[], Mapping[str, Any]]) -> Callable[[], None]:
    """The inline program: declare the resources, export what the program returns."""

    def run() -> None:
        for key, value in program().items():
            pulumi.export(key, value)

    return run


class PlainScript:
    """What a hand-written Automation API script sets up once: CLI, Pulumi home, backend, env."""

    def __init__(self, work: Path, settings: Settings) -> None:
        self.work = work
        self.backend = f"file://{work / 'backend'}"
        (work / "backend").mkdir(parents=True, exist_ok=True)
        root = settings.localcloud_root
        home = pulumi_home(root)
        install_plugins(home)
        cloud = ensure_cloud(
            root, settings.localcloud.port, region=settings.aws.region, say=lambda _line: None
        )
        self.region = settings.aws.region
        self.env_vars = {
            "PULUMI_BACKEND_URL": self.backend,
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_HOME": str(home),
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "AWS_REGION": self.region,
            ENDPOINT_ENV: cloud.url,
        }
        self.command = find_pulumi_cli()
        self.timings: list[dict[str, Any]] = []

    def stack(self, project: str, environment: str, program: Callable[[], None]) -> auto.Stack:
        work_dir = self.work / "workspaces" / project / environment
        work_dir.mkdir(parents=True, exist_ok=True)
        return auto.create_or_select_stack(
            stack_name=environment,
            project_name=project,
            program=program,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(work_dir),
                env_vars=self.env_vars,
                secrets_provider="passphrase",
                project_settings=auto.ProjectSettings(
                    name=project, runtime="python", backend=auto.ProjectBackend(url=self.backend)
                ),
                pulumi_command=self.command,
            ),
        )

    def _timed(self, environment: str, name: str, operation: str, started: float) -> None:
        self.timings.append(
            {
                "environment": environment,
                "stack": name,
                "operation": operation,
                "wall_s": round(time.perf_counter() - started, 3),
            }
        )

    def up(self, environment: str) -> dict[str, BaseModel]:
        """networking, database (then migrations), app (then a health check), in turn."""
        settings = get_settings(environment)
        outputs: dict[str, BaseModel] = {}
        for name, output_type in STACKS:
            started = time.perf_counter()
            spec, _args = GRAPH.spec(name, settings, outputs)  # the graph's argument builder
            project = f"{settings.project}-{name}"
            stack = self.stack(project, environment, inline_program(spec.program))
            stack.set_all_config({"aws:region": auto.ConfigValue(self.region)})
            result = stack.up(on_output=print)
            outputs[name] = output_type.model_validate(
                {k: result.outputs[k].value for k in output_type.model_fields}
            )
            self._timed(environment, name, "up", started)
            if name == "database":
                started = time.perf_counter()
                self.migrate(settings, outputs[name])
                self._timed(environment, "migrate", "migrate", started)
        started = time.perf_counter()
        app = outputs["app"]
        assert isinstance(app, AppOutputs)
        wait_healthy(app.url + settings.app.health_check_path)
        self._timed(environment, "verify", "verify", started)
        return outputs

    def migrate(self, settings: Settings, db: BaseModel) -> None:
        assert isinstance(db, DatabaseOutputs)
        target = MysqlTarget.from_outputs(db)
        report = migrate(target, settings.migrations, protected=settings.profile.protected)
        print(f"migrations: {len(report.applied)} applied, {report.already_applied} before")

    def refresh(self, environment: str) -> None:
        settings = get_settings(environment)
        for name, _output_type in STACKS:
            started = time.perf_counter()
            project = f"{settings.project}-{name}"
            stack = self.stack(project, environment, inline_program(dict))
            stack.set_all_config({"aws:region": auto.ConfigValue(self.region)})
            stack.refresh(on_output=print)
            self._timed(environment, name, "refresh", started)

    def destroy(self, environment: str) -> None:
        settings = get_settings(environment)
        for name, _output_type in reversed(STACKS):
            started = time.perf_counter()
            project = f"{settings.project}-{name}"
            stack = self.stack(project, environment, inline_program(dict))
            stack.set_all_config({"aws:region": auto.ConfigValue(self.region)})
            stack.destroy(on_output=print)
            self._timed(environment, name, "destroy", started)

    def resource_graph(self, environment: str) -> dict[str, list[dict[str, Any]]]:
        """Each stack's resources with their type and dependencies (no values)."""
        settings = get_settings(environment)
        found: dict[str, list[dict[str, Any]]] = {}
        for name, _output_type in STACKS:
            stack = self.stack(f"{settings.project}-{name}", environment, inline_program(dict))
            resources = (stack.export_stack().deployment or {}).get("resources") or []
            found[name] = [
                {
                    "urn": r["urn"],
                    "type": r["type"],
                    "custom": bool(r.get("custom")),
                    "dependencies": list(r.get("dependencies") or []),
                }
                for r in resources
            ]
        return found


def wait_healthy(url: str) -> int:
    """GET `url` until it answers below 400 (the app starts behind its load balancer)."""
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 0
        if 0 < status < 400:
            print(f"{url} answered {status}")
            return status
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer healthy within {HEALTH_TIMEOUT_S:g}s")
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("operation", choices=("up", "refresh", "destroy", "graph"))
    parser.add_argument("--env", action="append", required=True, help="environment (repeatable)")
    parser.add_argument("--work", type=Path, required=True, help="its backend and workspaces")
    parser.add_argument("--out", type=Path, help="write timings (or the graph) here (JSON)")
    args = parser.parse_args(argv)
    first = get_settings(args.env[0])
    started = time.perf_counter()
    script = PlainScript(args.work.resolve(), first)
    if args.operation == "graph":
        graph = json.dumps(script.resource_graph(args.env[0]))
        if args.out is not None:
            args.out.write_text(graph)
        else:
            print(graph)
        return 0
    setup_s = time.perf_counter() - started
    for environment in args.env:
        if args.operation == "up":
            script.up(environment)
        elif args.operation == "refresh":
            script.refresh(environment)
        else:
            script.destroy(environment)
    wall = time.perf_counter() - started
    print(
        f"plain Automation API script: {args.operation} of {', '.join(args.env)} on the local "
        f"cloud in {wall:.2f}s (pid {os.getpid()})",
        file=sys.stderr,
    )
    if args.out is not None:
        result: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "setup_s": round(setup_s, 3),
            "operations": script.timings,
        }
        args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
