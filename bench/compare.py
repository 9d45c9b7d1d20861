"""stackflow beside a plain Automation API script, both through the real engine on the local cloud.

Both sides run the same Pulumi CLI, the same Pulumi home (the project's provider plugins), the same
local cloud server and the same latency knobs, in processes of their own, one at a time; each has
its own state (stackflow: STACKFLOW_STATE_DIR; the script: its own file backend), and both read
what an environment deploys from the session's project (benchkit.bench_project): the dev template
says it for every environment of the run, a file of its own for the changed one. stackflow is
`python flows/run.py ...` end to end (or, for several environments, one parent flow running the
deploy flow per environment: bench/fanout.py); the baseline is bench/plain_automation.py (each
stack's `up` in turn, outputs handed on by hand, migrations and a health check as ours does).
Which side goes first alternates from one measurement to the next.

Measured (every figure beside the script's):

1. a first deploy with no injected latency (it is also both sides' warm-up);
2. a first deploy of one environment with latencies in AWS's proportions, scaled down
   (`DEPLOY_LATENCY_S`): wall time, and wall / the critical path of the injected latencies
   (`benchkit.critical_path_s`, from the resource graph Pulumi recorded); median of
   `--first-runs` (each on environments of its own);
3. the same for `--envs` environments at once (ours: one parent flow; the script: in turn);
4. a no-op `up` of the environment (ours skips unchanged stacks by fingerprint; the script runs
   `pulumi up` per stack), median of `--noop-runs`;
5. a refresh, with every read taking `READ_LATENCY_S`, median of `--refresh-runs`;
6. one changed stack (the app's desired count, 1 -> 2 -> 1, rewritten in the environment's file
   for both sides), median of the two;
7. CPU time, and peak memory of the process that runs the flow (or the script) and of the CLI
   processes under it (pulumi and the provider plugins), sampled from /proc (benchkit.TreeSampler);
8. what Prefect adds around one stack task (bench/overhead.py, on the deployed environment).

    .venv/bin/python bench/compare.py [--envs 2] [--noop-runs 3] [--first-runs 2]
                                      [--refresh-runs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchkit import (
    LOGS,
    PYTHON,
    ROOT,
    median,
    merge_results,
    run_metadata,
    say,
    table,
    workdir,
)
from compare_figures import Measured, figures_of
from critical import critical_path_s
from sampling import Run, run_measured
from sessions import Session, session

# Seconds per resource operation on the local cloud, in the proportions AWS shows (an RDS instance
# takes minutes, a load balancer and an ECS service a few, a NAT gateway one or two, the VPC and
# its subnets seconds), scaled down so a run fits in minutes. The largest matching selector wins.
DEPLOY_LATENCY_S = {
    "*": 0.1,
    "aws:ec2/vpc:Vpc": 1.0,
    "aws:ec2/subnet:Subnet": 0.5,
    "aws:ec2/natGateway:NatGateway": 2.5,
    "aws:lb/loadBalancer:LoadBalancer": 3.5,
    "aws:ecs/service:Service": 3.0,
    "aws:rds/instance:Instance": 8.0,
}
# A refresh only reads (Describe* calls): a fraction of a second each on AWS.
READ_LATENCY_S = {"*": 0.3}
# Every environment of the run gets a NAT gateway, so the networking stack has its slow piece:
# the dev template of the session's project says so (the run's names are all of the dev kind).
ENVIRONMENT: dict[str, Any] = {"network": {"nat_gateway": True}}
RUN_PY = "flows/run.py"
PLAIN = "bench/plain_automation.py"
TRACED = "bench/traced.py"
FIRST_DEPLOYS = ("a", "c", "d", "e", "f")  # environment suffixes of first deploys (b: the fan-out)
_FLOW_WALL = re.compile(r"engine operations: (\d+); wall time ([\d.]+)s")


class Sides:
    """Runs stackflow and the plain script on one session, and keeps every run's record."""

    def __init__(self, s: Session, folder: Path) -> None:
        self.s = s
        self.folder = folder
        self.ours_state = folder / "stackflow-state"
        self.plain_work = folder / "plain-script"
        self.runs: list[dict[str, Any]] = []
        self._count = 0

    def _log(self, name: str) -> Path:
        self._count += 1
        return LOGS / f"compare-{self._count:02d}-{name}.log"

    def _record(self, side: str, what: str, run: Run, **extra: Any) -> None:
        self.runs.append(
            {
                "side": side,
                "what": what,
                "command": " ".join(Path(a).name if a == PYTHON else a for a in run.argv),
                "wall_s": round(run.wall_s, 3),
                "cpu_s": run.cpu_s,
                **run.memory.as_dict(),
                **extra,
            }
        )

    def _traced(self, argv: list[str]) -> tuple[list[str], Path]:
        """`argv` (python SCRIPT ...) under bench/traced.py, which records every `pulumi`
        process the side starts: the same launcher for both sides, nothing in either's code."""
        trace = self.folder / f"trace-{self._count + 1}.jsonl"
        return [argv[0], TRACED, "--trace", str(trace), *argv[1:]], trace

    def ours(self, what: str, args: list[str]) -> Run:
        """`python flows/run.py ...` (or a bench script given as args[0] ending in .py)."""
        script = args[0] if args[0].endswith(".py") else RUN_PY
        rest = args[1:] if args[0].endswith(".py") else args
        env = self.s.env(self.ours_state)
        argv, trace = self._traced([PYTHON, script, *rest])
        run = run_measured(argv, env, self._log(f"ours-{what}")).check()
        found = _FLOW_WALL.findall(run.text())
        extra: dict[str, Any] = {"pulumi_processes": pulumi_processes(trace)}
        if found:
            extra |= {"engine_calls": int(found[-1][0]), "flow_wall_s": float(found[-1][1])}
        self._record("stackflow", what, run, **extra)
        say(f"stackflow {what}: {run.wall_s:.1f}s {extra}")
        return run

    def plain(
        self,
        what: str,
        operation: str,
        environments: list[str],
    ) -> tuple[Run, dict[str, Any]]:
        out = self.folder / f"plain-{self._count + 1}.json"
        argv = [PYTHON, PLAIN, operation, *[f"--env={e}" for e in environments]]
        argv += ["--work", str(self.plain_work), "--out", str(out)]
        env = self.s.env(None)
        argv, trace = self._traced(argv)
        run = run_measured(argv, env, self._log(f"plain-{what}")).check()
        timings: dict[str, Any] = json.loads(out.read_text())
        calls = sum(1 for o in timings["operations"] if o["operation"] in ("up", "refresh"))
        self._record(
            "plain",
            what,
            run,
            engine_calls=calls,
            pulumi_processes=pulumi_processes(trace),
            script_wall_s=timings["wall_s"],
            detail=timings,
        )
        say(f"plain script {what}: {run.wall_s:.1f}s (loop {timings['wall_s']:.1f}s)")
        return run, timings

    def graph(self, environment: str, out: Path) -> None:
        """The resource graph of a deployed environment of the script's (not a measurement)."""
        argv = [PYTHON, PLAIN, "graph", f"--env={environment}", "--work", str(self.plain_work)]
        env = self.s.env(None)
        run_measured([*argv, "--out", str(out)], env, self._log("plain-graph")).check()


def _pair(first_ours: bool, ours: Callable[[], Any], plain: Callable[[], Any]) -> tuple[Any, Any]:
    """Run both, in the order given (alternated by the caller so drift hits both sides)."""
    if first_ours:
        a = ours()
        return a, plain()
    b = plain()
    return ours(), b


def _wall(runs: list[Run]) -> float:
    return round(median([r.wall_s for r in runs]), 2)


def pulumi_processes(trace: Path) -> int:
    """How many `pulumi` processes a run started (bench/traced.py's trace: exact)."""
    return len(trace.read_text().splitlines()) if trace.exists() else 0


def _plain_run(sides: Sides, *args: Any) -> Run:
    return sides.plain(*args)[0]


def measure(
    s: Session,
    folder: Path,
    envs: int = 2,
    noop_runs: int = 5,
    first_runs: int = 5,
    refresh_runs: int = 5,
) -> dict[str, Any]:
    """Every figure; both sides on the session's servers."""
    sides = Sides(s, folder)
    s.template("dev", **ENVIRONMENT)

    # 1. first deploy, no injected latency (also both sides' warm-up: imports, Prefect's tables)
    s.set_latency({})
    cold_ours, cold_plain = _pair(
        False,
        lambda: sides.ours("first-up-no-latency", ["up", "--env", "ours-w"]),
        lambda: sides.plain("first-up-no-latency", "up", ["plain-w"])[0],
    )

    # 2. first deploy of one environment, latencies in AWS's proportions
    s.set_latency(DEPLOY_LATENCY_S)
    graph_file = folder / "resource-graph.json"
    first_ours: list[Run] = []
    first_plain: list[Run] = []
    for i, suffix in enumerate(FIRST_DEPLOYS[:first_runs]):
        a, b = _pair(
            i % 2 == 0,
            functools.partial(sides.ours, "first-up", ["up", "--env", f"ours-{suffix}"]),
            functools.partial(_plain_run, sides, "first-up", "up", [f"plain-{suffix}"]),
        )
        first_ours.append(a)
        first_plain.append(b)
    sides.graph("plain-a", graph_file)  # untimed: read back what Pulumi recorded
    critical = critical_path_s(json.loads(graph_file.read_text()), DEPLOY_LATENCY_S)
    cp = critical["environment"]
    say(f"critical path of the injected latencies: {critical}")

    # 3. several environments: ours at once (one parent flow), the script in turn
    names_ours = [f"ours-b{i}" for i in range(1, envs + 1)]
    names_plain = [f"plain-b{i}" for i in range(1, envs + 1)]
    fan_out = folder / "fanout.json"
    fan_ours, fan_plain = _pair(
        False,
        lambda: sides.ours("fan-out", ["bench/fanout.py", *names_ours, "--out", str(fan_out)]),
        lambda: sides.plain("in-turn", "up", names_plain)[0],
    )
    fan = json.loads(fan_out.read_text())

    # 4. no-op up: nothing changed since the last deploy
    noop_ours: list[Run] = []
    noop_plain: list[Run] = []
    for i in range(noop_runs):
        a, b = _pair(
            i % 2 == 0,
            lambda: sides.ours("noop-up", ["up", "--env", "ours-a"]),
            lambda: sides.plain("noop-up", "up", ["plain-a"])[0],
        )
        noop_ours.append(a)
        noop_plain.append(b)

    # 5. refresh: every read takes READ_LATENCY_S
    s.set_latency(READ_LATENCY_S)
    refresh_ours: list[Run] = []
    refresh_plain: list[Run] = []
    for i in range(refresh_runs):
        a, b = _pair(
            i % 2 == 1,
            lambda: sides.ours("refresh", ["refresh", "--env", "ours-a"]),
            lambda: sides.plain("refresh", "refresh", ["plain-a"])[0],
        )
        refresh_ours.append(a)
        refresh_plain.append(b)

    # 6. one changed stack: the app's desired count 1 -> 2, then back to 1 (the dev default)
    s.set_latency(DEPLOY_LATENCY_S)
    changed_ours: list[Run] = []
    changed_plain: list[Run] = []
    for i, app in enumerate(({"desired_count": 2}, {})):
        for name in ("ours-a", "plain-a"):  # each side's environment file, as a commit changes it
            s.declare(name, **ENVIRONMENT, app=app)
        a, b = _pair(
            i % 2 == 0,
            functools.partial(sides.ours, "changed-app", ["up", "--env", "ours-a"]),
            functools.partial(_plain_run, sides, "changed-app", "up", ["plain-a"]),
        )
        changed_ours.append(a)
        changed_plain.append(b)

    # 7. what Prefect adds around one stack task (its skip path), on the deployed environment
    overhead_out = folder / "overhead.json"
    sides.ours(
        "task-overhead", ["bench/overhead.py", "--env", "ours-a", "--out", str(overhead_out)]
    )
    overhead = json.loads(overhead_out.read_text())
    s.set_latency({})

    m = Measured(
        sides.runs, envs, noop_runs, first_runs, refresh_runs, cp, fan, overhead,
        cold_ours, cold_plain, first_ours, first_plain, fan_ours, fan_plain,
        noop_ours, noop_plain, refresh_ours, refresh_plain, changed_ours, changed_plain,
    )  # fmt: skip
    figures = figures_of(m, _short(DEPLOY_LATENCY_S), READ_LATENCY_S["*"])
    return {
        "figures": figures,
        "latency_s": {"deploy": DEPLOY_LATENCY_S, "refresh_reads": READ_LATENCY_S},
        "environment_files": {"environments/templates/dev.toml": ENVIRONMENT},
        "critical_path_s": critical,
        "fanout": {"environments": envs, **fan},
        "task_overhead": overhead,
        "runs": sides.runs,
        "method": (
            "stackflow: `python flows/run.py` end to end (fan-out: bench/fanout.py, one parent "
            "flow); baseline: bench/plain_automation.py (stack.up() per stack in turn, outputs "
            "handed on by hand, the same migrations and health check). Same Pulumi CLI, Pulumi "
            "home, local cloud server and latency knobs; own state each. Wall time is the whole "
            "process, measured from outside; memory from /proc every 0.1 s."
        ),
    }


def _short(latency: Mapping[str, float]) -> str:
    names = {"*": "anything else"}
    return ", ".join(f"{names.get(k, k.split(':')[-1])} {v:g} s" for k, v in latency.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=2, help="environments in the fan-out")
    parser.add_argument("--noop-runs", type=int, default=5, help="no-op `up` runs per side")
    parser.add_argument(
        "--first-runs",
        type=int,
        default=5,
        choices=range(1, len(FIRST_DEPLOYS) + 1),
        help="first deploys of one environment per side",
    )
    parser.add_argument("--refresh-runs", type=int, default=5, help="refreshes per side")
    parser.add_argument("--out", type=Path, help="write results here instead of bench/results.json")
    args = parser.parse_args(argv)
    LOGS.mkdir(exist_ok=True)
    for old in LOGS.glob("compare-*.log"):  # an earlier run's, numbered differently
        old.unlink()
    with workdir("compare") as tmp, session(Path(tmp)) as s:
        results = measure(
            s, Path(tmp), args.envs, args.noop_runs, args.first_runs, args.refresh_runs
        )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))
        return
    merge_results({**results, **run_metadata()})
    print(table(results))
    print(f"\nmerged into {Path('bench/results.json')} (from {ROOT})")


if __name__ == "__main__":
    main()
