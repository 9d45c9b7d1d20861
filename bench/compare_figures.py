"""The figures of bench/compare.py's runs: each of stackflow's beside the plain script's, with how
it was measured (what goes into bench/results.json and the README's table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchkit import SAMPLE_S, figure, median
from sampling import Run

UP = "flows/run.py up"
SCRIPT_UP = "plain_automation.py up"


@dataclass
class Measured:
    """Every run bench/compare.py made, by kind, and what they were measured against."""

    runs: list[dict[str, Any]]
    envs: int
    noop_runs: int
    first_runs: int
    refresh_runs: int
    cp: float  # the critical path of the injected latencies, one environment
    fan: dict[str, Any]
    overhead: dict[str, Any]
    cold_ours: Run
    cold_plain: Run
    first_ours: list[Run]
    first_plain: list[Run]
    fan_ours: Run
    fan_plain: Run
    noop_ours: list[Run]
    noop_plain: list[Run]
    refresh_ours: list[Run]
    refresh_plain: list[Run]
    changed_ours: list[Run]
    changed_plain: list[Run]


def _wall(runs: list[Run]) -> float:
    return round(median([r.wall_s for r in runs]), 2)


def _processes(m: Measured, side: str, what: str) -> int | None:
    """The median count of `pulumi` processes of a kind of run (bench/traced.py: exact)."""
    found = [r["pulumi_processes"] for r in m.runs if (r["side"], r["what"]) == (side, what)]
    return round(median(found)) if found else None


def _per_operation(m: Measured, side: str, what: str) -> float | None:
    """`pulumi` processes per stack operation (per `up`/`refresh` the run made): None with none."""
    runs = [r for r in m.runs if (r["side"], r["what"]) == (side, what)]
    per = [r["pulumi_processes"] / r["engine_calls"] for r in runs if r.get("engine_calls")]
    return round(median(per), 1) if per else None


def process_figures(m: Measured) -> dict[str, Any]:
    """`pulumi` processes per run and per stack operation, both sides."""
    how = "every `pulumi` process either side started, recorded by bench/traced.py (exact)"
    rows: dict[str, Any] = {}
    for key, what, label in (
        ("first_up", "first-up", "first deploy"),
        ("noop_up", "noop-up", "no-op `up`"),
        ("refresh", "refresh", "refresh"),
        ("changed_stack", "changed-app", "one changed stack"),
    ):
        rows[f"{key}_pulumi_processes"] = figure(
            f"  `pulumi` processes started: {label} (median)",
            _processes(m, "stackflow", what),
            _processes(m, "plain", what),
            "",
            how,
        )
        ours, plain = _per_operation(m, "stackflow", what), _per_operation(m, "plain", what)
        if ours is not None or plain is not None:
            rows[f"{key}_pulumi_processes_per_operation"] = figure(
                f"  `pulumi` processes per stack operation: {label}",
                ours,
                plain,
                "",
                how + "; divided by the `up`/`refresh` operations the run made",
            )
    return rows


def figures_of(m: Measured, latencies: str, read_s: float) -> dict[str, Any]:
    """Every figure of the table."""
    envs, noop_runs, first_runs, refresh_runs, cp = (
        m.envs, m.noop_runs, m.first_runs, m.refresh_runs, m.cp
    )  # fmt: skip
    cold_ours, cold_plain, fan_ours, fan_plain = m.cold_ours, m.cold_plain, m.fan_ours, m.fan_plain
    first_ours, first_plain, noop_ours, noop_plain = (
        m.first_ours, m.first_plain, m.noop_ours, m.noop_plain
    )  # fmt: skip
    refresh_ours, refresh_plain, changed_ours, changed_plain = (
        m.refresh_ours, m.refresh_plain, m.changed_ours, m.changed_plain
    )  # fmt: skip
    fan, overhead = m.fan, m.overhead
    names_ours = [f"ours-b{i}" for i in range(1, envs + 1)]
    names_plain = [f"plain-b{i}" for i in range(1, envs + 1)]
    sides_runs = m.runs
    up, script_up = UP, SCRIPT_UP
    by = {(r["side"], r["what"]): r for r in sides_runs}  # the last run of each kind
    noop_calls = by[("stackflow", "noop-up")].get("engine_calls")
    changed_calls = by[("stackflow", "changed-app")].get("engine_calls")
    flow_noop = [
        r["flow_wall_s"] for r in sides_runs if r["what"] == "noop-up" and "flow_wall_s" in r
    ]
    loop_noop = [
        r["script_wall_s"] for r in sides_runs if r["what"] == "noop-up" and "script_wall_s" in r
    ]
    vs = f"`{up} --env ours-a` · `{script_up} --env plain-a`"
    ours_first = f"first up of one environment, latencies {latencies}"
    figures: dict[str, Any] = {
        "deploy_wall_s": figure(
            f"first deploy of one environment: wall time (median of {first_runs} alternating pairs)",
            _wall(first_ours),
            _wall(first_plain),
            "s",
            vs + " (and ours-c · plain-c, ...)",
            note=_spread(first_ours, first_plain),
        ),
        "critical_path_s": figure(
            "  critical path of the injected latencies (same for both)", cp, cp, "s", ours_first
        ),
        "critical_path_ratio": figure(
            "critical-path ratio, one environment (wall / critical path)",
            round(_wall(first_ours) / cp, 2),
            round(_wall(first_plain) / cp, 2),
            "",
            vs,
        ),
        "fanout_wall_s": figure(
            f"first deploy of {envs} environments: wall time (ours at once, the script in turn)",
            fan_ours.wall_s,
            fan_plain.wall_s,
            "s",
            f"`fanout.py {' '.join(names_ours)}` · `{script_up} "
            + " ".join(f"--env {n}" for n in names_plain)
            + "`",
            note=f"Prefect's client backed off {fan['client_retry_sleeps']} time(s) "
            f"({fan['client_retry_sleep_s']:.1f} s) on the SQLite server's 503s"
            if fan["client_retry_sleeps"]
            else "",
        ),
        "fanout_critical_path_ratio": figure(
            f"critical-path ratio, {envs} environments (wall / critical path)",
            round(fan_ours.wall_s / cp, 2),
            round(fan_plain.wall_s / cp, 2),
            "",
            "the two runs above",
        ),
        "no_latency_deploy_wall_s": figure(
            "first deploy, no injected latency (the engine's own time; first run of each side)",
            cold_ours.wall_s,
            cold_plain.wall_s,
            "s",
            f"`{up} --env ours-w` · `{script_up} --env plain-w`",
        ),
        "noop_up_wall_s": figure(
            f"no-op `up` of the environment, whole process (median of {noop_runs})",
            round(median([r.wall_s for r in noop_ours]), 2),
            round(median([r.wall_s for r in noop_plain]), 2),
            "s",
            vs,
            note=f"ours {min(r.wall_s for r in noop_ours):.2f}-{max(r.wall_s for r in noop_ours):.2f} s",
        ),
        "noop_up_inner_s": figure(
            "  of which the flow / the script's loop",
            round(median(flow_noop), 2) if flow_noop else None,
            round(median(loop_noop), 2) if loop_noop else None,
            "s",
            "the runs above",
        ),
        "noop_up_engine_calls": figure(
            "  engine operations (`pulumi up` runs) in a no-op `up`",
            noop_calls,
            by[("plain", "noop-up")]["engine_calls"],
            "",
            "the runs above",
        ),
        "refresh_wall_s": figure(
            f"refresh of the environment (ours: 3 stacks at once; every read "
            f"{read_s} s), median of {refresh_runs}",
            _wall(refresh_ours),
            _wall(refresh_plain),
            "s",
            "`flows/run.py refresh --env ours-a` · `plain_automation.py refresh --env plain-a`",
            note=_spread(refresh_ours, refresh_plain),
        ),
        "changed_stack_wall_s": figure(
            "one changed stack (app's desired count), `up` of the environment (median of 2)",
            round(median([r.wall_s for r in changed_ours]), 2),
            round(median([r.wall_s for r in changed_plain]), 2),
            "s",
            vs + " with `desired_count = 2` under [app] in each one's environment file, then "
            "without",
            note=_spread(changed_ours, changed_plain),
        ),
        "changed_stack_engine_calls": figure(
            "  engine operations in it",
            changed_calls,
            by[("plain", "changed-app")]["engine_calls"],
            "",
            "the runs above",
        ),
    }
    for key, label, ours_runs, plain_runs in (
        ("deploy", "first deploy of one environment (median)", first_ours, first_plain),
        ("fanout", f"{envs} environments", [fan_ours], [fan_plain]),
        ("noop", "no-op `up` (median)", noop_ours, noop_plain),
        ("refresh", "refresh (median)", refresh_ours, refresh_plain),
        ("changed", "one changed stack (median)", changed_ours, changed_plain),
    ):
        figures[f"{key}_cpu_s"] = figure(
            f"CPU time (user + sys) of the process and its CLI processes: {label}",
            round(median([r.cpu_s for r in ours_runs]), 1),
            round(median([r.cpu_s for r in plain_runs]), 1),
            "s",
            "rusage of the process and the descendants it waited for",
        )
    for key, label, ours_runs, plain_runs in (
        ("deploy", "first deploy of one environment", first_ours, first_plain),
        ("fanout", f"{envs} environments", [fan_ours], [fan_plain]),
        ("refresh", "refresh", refresh_ours, refresh_plain),
    ):
        figures[f"{key}_process_peak_rss_mb"] = figure(
            f"peak RSS of the flow process / the script's process: {label}",
            round(max(r.memory.root_mb for r in ours_runs)),
            round(max(r.memory.root_mb for r in plain_runs)),
            "MiB",
            "VmHWM from /proc",
        )
        figures[f"{key}_cli_peak_rss_mb"] = figure(
            f"peak RSS of the CLI processes (pulumi + plugins, summed at one time): {label}",
            round(max(r.memory.tree_mb for r in ours_runs)),
            round(max(r.memory.tree_mb for r in plain_runs)),
            "MiB",
            f"VmRSS of every descendant, sampled every {SAMPLE_S:g} s",
        )
    measured = (
        (*first_ours, fan_ours, *refresh_ours, *changed_ours),
        (*first_plain, fan_plain, *refresh_plain, *changed_plain),
    )
    for kind in ("pulumi CLI", "aws plugin", "random plugin"):
        ours_peak, plain_peak = (
            max(r.memory.by_kind_mb.get(kind, 0.0) for r in m) for m in measured
        )
        figures[f"peak_rss_{kind.replace(' ', '_')}_mb"] = figure(
            f"  peak RSS of one {kind} process (any run above)",
            round(ours_peak),
            round(plain_peak),
            "MiB",
            "VmHWM from /proc",
        )
    figures["task_overhead_ms_median"] = figure(
        "Prefect's cost around one stack task (skip path, median)",
        overhead["task_overhead_ms_median"],
        "none (no tasks)",
        "ms",
        "`bench/overhead.py --env ours-a`",
    )
    figures.update(process_figures(m))
    return figures


def _spread(ours: list[Any], plain: list[Any]) -> str:
    """Each alternating pair's ratio, lowest to highest: how much one run's figure may move."""
    ratios = sorted(a.wall_s / b.wall_s for a, b in zip(ours, plain, strict=True) if b.wall_s)
    if not ratios:
        return ""
    return (
        f"pair ratios {ratios[0]:.2f}-{ratios[-1]:.2f} ("
        + ", ".join(f"{r:.2f}" for r in ratios)
        + ")"
    )
