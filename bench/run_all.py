"""Run every benchmark and write bench/results.json: stackflow beside a plain Automation API script,
both through the real Pulumi engine on the local cloud.

    .venv/bin/python bench/run_all.py                  # the full run (~12-15 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --cold-build     # also build the Pulumi CLI from zero (+7 min)
    .venv/bin/python bench/run_all.py --only toolchain # a subset, merged into the existing results
    .venv/bin/python bench/run_all.py --markdown       # print the README's table from the results

One benchmark at a time, each in its own process, output in /tmp/stackflow-bench-logs/:

- toolchain (bench/toolchain.py): the Pulumi CLI from the cache (and, with --cold-build, from
  source into empty caches; otherwise the last cold figure is carried over with its date), and how
  long the project's provider plugins take to start;
- compare (bench/compare.py): starts a Prefect server and a local cloud server on free ports, then
  measures stackflow (`python flows/run.py ...`) beside bench/plain_automation.py on them: first
  deploys with and without latency, several environments, a no-op `up`, a refresh, one changed
  stack, peak memory and CPU, and the task overhead; stops both servers and the cloud's databases;
- migrations (bench/migrations.py): 200 migrations on a MariaDB of its own (stackflow/localdb.py).

The bulk migration beside the `mariadb` client is a run of its own too, `bench/bulk_migrations.py`
(key `migrations_bulk`, kept by a full run here; docs/benchmarks.md shows it).

The fan-out on SQLite beside PostgreSQL (N = 1, 4, 16, 32 environments at once) is a run of its
own, `bench/fanout_team.py` (~20-25 min on 2 quiet cores): it keeps its figures under the key
`fanout_team` of bench/results.json, which a full run here leaves in place, and --markdown prints
its tables after the main one.

A full run replaces bench/results.json: the figures, each beside its baseline and the command that
made it, the run's versions, cores, load average at start and end, and its total time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchkit import (
    LOGS,
    PYTHON,
    RESULTS,
    ROOT,
    TARGET,
    TITLE,
    figure,
    markdown_table,
    merge_results,
    run_metadata,
    say,
    table,
    workdir,
    write_results,
)
from bulk_migrations import KEY as BULK_KEY
from fanout_report import KEY as FANOUT_KEY
from fanout_report import markdown as fanout_markdown
from toolchain import figures as toolchain_figures

EVERY = ("toolchain", "compare", "migrations")
MIGRATION_KEYS = ("migrations_apply_200_s", "migrations_noop_ms")
TIMEOUT_S = {"toolchain": 1200, "compare": 3600, "migrations": 300}
SUBSET_KEY = "subset_runs"  # `--only` runs since the full run, each with its own line


def run_child(name: str, argv: list[str], out: Path | None) -> dict[str, Any]:
    """One benchmark in a process of its own; its results from `out` (or, for migrations, from
    bench/results.json, where it merges them itself)."""
    log = LOGS / f"{name}.log"
    started = time.monotonic()
    say(f"{name}: {' '.join(argv[1:])} (log {log})")
    with log.open("w") as handle:
        done = subprocess.run(
            argv,
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT_S[name],
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(
            f"{name} failed (exit {done.returncode}); log {log}:\n{log.read_text()[-3000:]}"
        )
    say(f"{name} done in {time.monotonic() - started:.0f}s")
    if out is not None:
        result: dict[str, Any] = json.loads(out.read_text())
        return result
    written = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    return {key: written.get(key) for key in MIGRATION_KEYS}


def migration_figures(found: dict[str, Any]) -> dict[str, Any]:
    how = "`bench/migrations.py` (a real MariaDB of its own, not the local cloud)"
    same = "same (the script runs the same migration code)"
    return {
        "migrations_apply_200_s": figure(
            "200 migration files applied to a fresh MariaDB",
            found.get("migrations_apply_200_s"),
            same,
            "s",
            how,
        ),
        "migrations_noop_ms": figure(
            "no-op migration check (median of 20)",
            found.get("migrations_noop_ms"),
            same,
            "ms",
            how,
        ),
    }


def readme_section(results: dict[str, Any]) -> str:
    """The README's benchmark table with the line that says where and how it was made."""
    load = f"load average {results.get('load_average_1m_at_start')} at start, " + (
        f"{results.get('load_average_1m')} at the end"
    )
    versions = ", ".join(f"{k} {v}" for k, v in results.get("versions", {}).items())
    head = (
        f"Latest run: {results.get('timestamp')}, {results.get('cores')} cores, {load}; "
        f"{versions}. `{results.get('command')}` took {results.get('bench_wall_s', 0):.0f} s."
    )
    for run in results.get(SUBSET_KEY, []):
        head += (
            f" Since then `bench/run_all.py --only {','.join(run['only'])}` ran again at "
            f"{run['timestamp']} (load average {run['load_average_1m_at_start']} at start, "
            f"{run['load_average_1m']} at the end, {run['bench_wall_s']:.0f} s): its rows are "
            "that run's."
        )
    section = head + "\n\n" + markdown_table(results)
    if FANOUT_KEY in results:  # bench/fanout_team.py's own run, with its own line
        section += "\n\n" + fanout_markdown(results[FANOUT_KEY])
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", help=f"comma-separated subset of {', '.join(EVERY)} (merged into the results)"
    )
    parser.add_argument(
        "--cold-build", action="store_true", help="also build the Pulumi CLI from zero (~7 min)"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="print the README's table from bench/results.json"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(readme_section(json.loads(RESULTS.read_text())))
        return 0
    wanted = [w.strip() for w in (args.only or ",".join(EVERY)).split(",") if w.strip()]
    unknown = set(wanted) - set(EVERY)
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(sorted(unknown))}; accepted: {EVERY}")
    started = time.monotonic()
    load_before = round(os.getloadavg()[0], 2)
    LOGS.mkdir(exist_ok=True)
    results: dict[str, Any] = {"title": TITLE, "figures": {}}
    rows: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    with workdir("all") as tmp:
        for name in wanted:
            out = Path(tmp) / f"{name}.json"
            try:
                if name == "toolchain":
                    cold = ["--cold-build"] if args.cold_build else []
                    found = run_child(
                        name, [PYTHON, "bench/toolchain.py", *cold, "--out", str(out)], out
                    )
                    rows[name] = toolchain_figures(found)
                elif name == "compare":
                    found = run_child(name, [PYTHON, "bench/compare.py", "--out", str(out)], out)
                    rows[name] = found.pop("figures")
                else:
                    found = run_child(name, [PYTHON, "bench/migrations.py"], None)
                    rows[name] = migration_figures(found)
                results[name] = found
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                errors.append(f"{name}: {exc}")
                say(str(exc))
    for name in ("compare", "toolchain", "migrations"):  # the table's order
        results["figures"].update(rows.get(name, {}))
    results["bench_wall_s"] = round(time.monotonic() - started, 1)
    results["command"] = ".venv/bin/python bench/run_all.py" + (
        " --cold-build" if args.cold_build else ""
    )
    results.update(run_metadata())
    results["load_average_1m_at_start"] = load_before
    results["baseline"] = (
        "bench/plain_automation.py: a plain Automation API script (create_or_select_stack with an "
        "inline program, set config, stack.up() per stack in turn, outputs handed on by hand, the "
        "same migrations and health check), same CLI, Pulumi home, local cloud and latencies"
    )
    if args.only:
        # the file's run-wide keys describe its full run: this subset gets a line of its own
        subset = {
            "only": wanted,
            "timestamp": results.pop("timestamp"),
            "load_average_1m_at_start": results.pop("load_average_1m_at_start"),
            "load_average_1m": results.pop("load_average_1m"),
            "bench_wall_s": results.pop("bench_wall_s"),
        }
        del results["command"]
        earlier = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        runs = [r for r in earlier.get(SUBSET_KEY, []) if not set(r["only"]) <= set(wanted)]
        results[SUBSET_KEY] = [*runs, subset]
        merge_results(results)
    elif not errors:
        earlier = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        for key in (FANOUT_KEY, BULK_KEY):  # runs of their own (fanout_team, bulk_migrations): kept
            if key in earlier:
                results[key] = earlier[key]
        write_results(results)
    print(table(results))
    print(
        f"\n{TARGET}: {results['timestamp']}  cores {results['cores']}  load (1 min) {load_before}"
        f" at start, {results['load_average_1m']} at the end; this run took "
        f"{time.monotonic() - started:.0f}s"
    )
    print("results.json NOT written" if errors and not args.only else f"written to {RESULTS}")
    for error in errors:
        print(f"error: {error.splitlines()[0]}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    raise SystemExit(main())
