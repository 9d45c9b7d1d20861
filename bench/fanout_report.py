"""The fan-out benchmark's rows and tables: bench/fanout_team.py makes them, `run_all.py
--markdown` prints them under the README's main table (from bench/results.json, key `KEY`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

KEY = "fanout_team"
TARGET = "wall / ideal <= 1.2 on PostgreSQL with 0 client back-offs (issue 21)"
DATABASES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
# the order of the CPU table; kinds not named here follow, largest first
KINDS = (
    "pulumi",
    "aws plugin",
    "random plugin",
    "local cloud server (moto)",
    "MariaDB",
    "Prefect server",
    "PostgreSQL",
    "flow process",
    "flow tree: not seen by the sampler",
)
PROFILE_TOP = 8


def summary_row(
    database: str,
    n: int,
    names: Sequence[str],
    run: Mapping[str, Any],
    critical_s: float | None,
    cores: int,
) -> dict[str, Any]:
    """One measurement's figures: `run` is what fanout_team.fan_out returned."""
    trees = run["trees"]
    fan: Mapping[str, Any] = run["fanout"]
    cpu = sum(trees.cpu_s.values())
    per_core = cpu / cores
    ideal = max(critical_s or 0.0, per_core)
    peak, root = trees.peak_mb, trees.root_peak_mb
    return {
        "database": database,
        "environments": n,
        "names": f"{names[0]} .. {names[-1]}",
        "ok": run["exit"] == 0,
        "wall_s": round(run["wall_s"], 1),
        "critical_path_s": critical_s,
        "cpu_s": round(cpu, 1),
        "cores": cores,
        "ideal_s": round(ideal, 1),
        "ideal_bound": "CPU / cores" if per_core >= (critical_s or 0.0) else "critical path",
        "wall_over_ideal": round(run["wall_s"] / ideal, 2) if ideal else None,
        "client_backoffs": fan.get("client_retry_sleeps"),
        "client_backoff_s": fan.get("client_retry_sleep_s"),
        "engine_calls": fan.get("engine_calls"),
        "flow_wall_s": fan.get("wall_s"),
        "cpu_by_process_tree_s": {k: round(v, 1) for k, v in trees.cpu_s.items()},
        "cpu_by_kind_s": {k: round(v, 1) for k, v in trees.cpu_by_kind_s.items()},
        "peak_rss_mb": {
            "prefect_server": round(peak.get("prefect", 0.0)),
            "flow_process": round(root.get("flow", 0.0)),
            "flow_tree": round(peak.get("flow", 0.0)),
            "postgres": round(peak["postgres"]) if "postgres" in peak else None,
            "local_cloud": round(peak.get("cloud", 0.0)),
        },
        "largest_process_rss_mb_by_kind": trees.as_dict()["largest_process_rss_mb_by_kind"],
        "processes_seen": trees.as_dict()["processes_seen"],
        "sampler": {"samples": trees.samples, "own_cpu_s": round(trees.sampler_cpu_s, 2)},
        # what else the machine ran meanwhile (another's tests, the bench's own sampler): a busy
        # machine makes wall / ideal meaningless
        "others_cpu_s": round(trees.machine_cpu_s - cpu, 1),
        "profile": fan.get("profile"),
    }


def _num(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _memory(peaks: Mapping[str, Any]) -> str:
    order = ("prefect_server", "flow_process", "flow_tree", "postgres", "local_cloud")
    return " · ".join(_num(peaks.get(k)) for k in order)


def _cells(row: Mapping[str, Any]) -> list[str]:
    where = DATABASES.get(row["database"], row["database"])
    if not row.get("ok") and "wall_s" not in row:
        return [str(row["environments"]), where, row.get("error", "failed")[:200]] + [""] * 5
    failed = "" if row.get("ok") else " (failed: see results.json)"
    return [
        str(row["environments"]),
        where,
        _num(row["wall_s"], " s") + failed,
        f"{_num(row['ideal_s'], ' s')} ({row['ideal_bound']})",
        _num(row["wall_over_ideal"], "", 2),
        f"{_num(row['cpu_s'], ' s')} / {row['cores']}"
        + (f" (others: {_num(row['others_cpu_s'], ' s')})" if "others_cpu_s" in row else ""),
        f"{row['client_backoffs']} ({_num(row['client_backoff_s'], ' s')})",
        _memory(row["peak_rss_mb"]),
    ]


HEAD = (
    "environments at once",
    "Prefect's database",
    "wall",
    "ideal (bound)",
    "wall / ideal",
    "CPU of every process / cores (the machine's other processes meanwhile)",
    "Prefect client back-offs (slept)",
    "peak RSS, MiB: Prefect server · flow process · flow + CLI processes · PostgreSQL · "
    "local cloud",
)


def _table(head: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body]


def _largest(section: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The runs of the largest N that has a measurement (one per database)."""
    measured = [r for r in section.get("runs", []) if "cpu_by_kind_s" in r]
    if not measured:
        return []
    n = max(r["environments"] for r in measured)
    return [r for r in measured if r["environments"] == n]


def cpu_by_kind(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """CPU seconds by process kind, a column per database, with each kind's share."""
    kinds = [k for k in KINDS if any(k in r["cpu_by_kind_s"] for r in runs)]
    rest = {k for r in runs for k in r["cpu_by_kind_s"]} - set(kinds)
    kinds += sorted(rest, key=lambda k: -max(r["cpu_by_kind_s"].get(k, 0) for r in runs))
    head = ["process kind", *(DATABASES.get(r["database"], r["database"]) for r in runs)]
    body = []
    for kind in [*kinds, "all"]:
        cells = [kind]
        for r in runs:
            value = r["cpu_s"] if kind == "all" else r["cpu_by_kind_s"].get(kind)
            share = f" ({100 * value / r['cpu_s']:.0f}%)" if value and r["cpu_s"] else ""
            cells.append(_num(value, " s") + share)
        body.append(cells)
    return _table(head, body)


def profile_tables(run: Mapping[str, Any]) -> list[str]:
    profile = run.get("profile") or {}
    if not profile:
        return []
    lines = _table(
        ["flow process: function its thread was in (self)", "CPU"],
        [[f"`{k}`", _num(v, " s", 2)] for k, v in profile["by_self"][:PROFILE_TOP]],
    )
    lines += [
        "",
        *_table(
            ["flow process: function on its thread's stack (cumulative)", "CPU"],
            [
                [f"`{k}`", _num(v, " s", 2)]
                for k, v in profile.get("by_cumulative", [])[:PROFILE_TOP]
            ],
        ),
    ]
    by_package = ", ".join(f"{k} {v:.1f} s" for k, v in profile["by_package"][:8])
    by_thread = ", ".join(f"{k} {v:.1f} s" for k, v in profile["by_thread"][:6])
    return [
        *lines,
        "",
        f"By package: {by_package}. By thread: {by_thread}. Sampled: {profile['cpu_s']:.1f} s "
        f"(before sampling began, imports and start-up: {profile['cpu_before_profile_s']:.1f} s).",
    ]


def markdown(section: Mapping[str, Any]) -> str:
    """The README's fan-out section: the line that says where and how, the table per N and
    database, and at the largest N the CPU by process kind and the flow process's profile."""
    head = (
        f"Fan-out run: {section.get('timestamp')}, {section.get('cores')} cores, "
        f"{section.get('memory_total_mb')} MiB, load average "
        f"{section.get('load_average_1m_at_start')} at start, {section.get('load_average_1m')} "
        f"at the end; `{section.get('command')}` took {section.get('bench_wall_s', 0):.0f} s. "
        f"Target: {section.get('target')}."
    )
    lines = [head, "", *_table(HEAD, [_cells(r) for r in section.get("runs", [])])]
    largest = _largest(section)
    if largest:
        n = largest[0]["environments"]
        lines += ["", f"Where the CPU went at N = {n}:", "", *cpu_by_kind(largest)]
        # the target's database (results.json keeps every run's profile)
        run = next((r for r in largest if r["database"] == "postgres"), largest[0])
        where = DATABASES.get(run["database"], run["database"])
        tables = profile_tables(run)
        if tables:
            lines += ["", f"The flow process's own CPU at N = {n} on {where}:", "", *tables]
    return "\n".join(lines)


def text_table(section: Mapping[str, Any]) -> str:
    """The per-run table for a terminal."""
    rows = [_cells(r) for r in section.get("runs", [])]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(HEAD[:-1])]
    lines = ["  ".join(h[:w].ljust(w) for h, w in zip(HEAD[:-1], widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) for r in rows]
    return "\n".join(lines)
