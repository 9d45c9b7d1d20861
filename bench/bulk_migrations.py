"""Benchmark: a bulk data migration, `python flows/run.py migrate` beside the `mariadb` client on the
same files and server, whole command against whole command (Python's start included).

    .venv/bin/python bench/bulk_migrations.py [--employees 100000] [--rounds 5] [--no-save]

The files are generated here (the employees sample cannot be fetched): a schema file and a data
file shaped as mysqldump writes one by default (conditional-comment SETs, LOCK TABLES and DISABLE
KEYS around each table's rows), its rows in multi-row INSERTs of about 1 MB, 100,000 employees
and two salaries each. Each round
migrates a fresh database with each tool, in alternating order, on a MariaDB of its own
(stackflow/localdb.py); the figures are medians. The runner's own time (load, wait, migrate:
the one migrate command in-process, no interpreter start) is timed on fresh databases too.

Then the runner's guarantees on the same files: the migration lock is taken (a second runner
started meanwhile waits and finds nothing to do), the checksums are recorded, and a run killed
with SIGKILL between two INSERTs resumes at the next statement, every row there once.

Figures go to bench/results.json under the key `migrations_bulk` (other keys kept).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import PYTHON, ROOT, merge_results, run_metadata

from stackflow.localdb import (
    admin_connection,
    ensure_local_mariadb,
    find_binary,
    grant_database,
    stop_local_mariadb,
)
from stackflow.migrator.command import migrate
from stackflow.migrator.connection import connect
from stackflow.migrator.target import MysqlTarget
from stackflow.processes import free_port
from stackflow.settings import MigrationSettings

KEY = "migrations_bulk"
_STATEMENT_BYTES = 1_000_000  # mysqldump's default net_buffer_length splits INSERTs near 1 MB

_SCHEMA = """CREATE TABLE employees (
  emp_no INT NOT NULL, birth_date DATE NOT NULL, first_name VARCHAR(14) NOT NULL,
  last_name VARCHAR(16) NOT NULL, gender ENUM('M','F') NOT NULL, hire_date DATE NOT NULL,
  PRIMARY KEY (emp_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE salaries (
  emp_no INT NOT NULL, salary INT NOT NULL, from_date DATE NOT NULL, to_date DATE NOT NULL,
  PRIMARY KEY (emp_no, from_date),
  CONSTRAINT salaries_emp FOREIGN KEY (emp_no) REFERENCES employees (emp_no) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
"""
_NAMES = ["Georgi", "Bezalel", "Parto", "Chirstian", "Kyoichi", "Anneke", "Tzvetan", "Saniya"]
_LAST = ["Facello", "Simmel", "Bamford", "Koblick", "Maliniak", "Preusig", "O'Brien", "Peac"]


def _date(r: random.Random, year: int) -> str:
    return f"{year + r.randrange(10)}-{1 + r.randrange(12):02d}-{1 + r.randrange(28):02d}"


def _inserts(table: str, rows: list[str]) -> list[str]:
    """Multi-row INSERTs of about 1 MB each, as mysqldump's extended inserts are."""
    out, batch, size = [], [], 0
    for row in rows:
        batch.append(row)
        size += len(row) + 1
        if size >= _STATEMENT_BYTES:
            out.append(f"INSERT INTO `{table}` VALUES {','.join(batch)};\n")
            batch, size = [], 0
    if batch:
        out.append(f"INSERT INTO `{table}` VALUES {','.join(batch)};\n")
    return out


def generate(folder: Path, employees: int) -> dict[str, int]:
    """The schema and data files; returns rows per table."""
    folder.mkdir(parents=True)
    (folder / "V1__employees_schema.sql").write_text(_SCHEMA)
    r = random.Random(7)
    people, pay = [], []
    for n in range(10001, 10001 + employees):
        last = _LAST[r.randrange(len(_LAST))].replace("'", "\\'")  # as mysqldump escapes
        people.append(
            f"({n},'{_date(r, 1952)}','{_NAMES[r.randrange(len(_NAMES))]}','{last}',"
            f"'{'MF'[r.randrange(2)]}','{_date(r, 1985)}')"
        )
        for year in (1995, 1996):
            pay.append(f"({n},{40000 + r.randrange(60000)},'{year}-06-26','{year + 1}-06-26')")
    head = (
        "-- MariaDB dump 10.19 (the shape mysqldump writes by default)\n"
        "/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n"
        "/*!40101 SET NAMES utf8mb4 */;\n"
        "/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;\n"
        "/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;\n"
    )
    body = [head]
    for table, rows in (("employees", people), ("salaries", pay)):
        body.append(f"\n--\n-- Dumping data for table `{table}`\n--\n\n")
        body.append(
            f"LOCK TABLES `{table}` WRITE;\n/*!40000 ALTER TABLE `{table}` DISABLE KEYS */;\n"
        )
        body += _inserts(table, rows)
        body.append(f"/*!40000 ALTER TABLE `{table}` ENABLE KEYS */;\nUNLOCK TABLES;\n")
    body.append(
        "/*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;\n"
        "/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;\n"
        "/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;\n"
    )
    (folder / "V2__employees_data.sql").write_text("".join(body))
    return {"employees": len(people), "salaries": len(pay)}


class Bench:
    """The server, its admin socket and a fresh database per measurement."""

    def __init__(self, base: Path, folder: Path) -> None:
        self.base, self.folder, self.count = base, folder, 0
        self.password = secrets.token_urlsafe(18)
        self.target = ensure_local_mariadb(
            base / "mariadb", free_port(), user="bench", password=self.password, database="bench"
        )

    def fresh(self) -> MysqlTarget:
        self.count += 1
        name = f"bulk_{self.count}"
        with admin_connection(self.base / "mariadb") as conn:
            grant_database(conn, name, self.target.user)
        t = self.target
        return MysqlTarget(t.host, t.port, t.user, t.password, name)

    def url(self, target: MysqlTarget) -> str:
        return (
            f"mysql://{target.user}:{self.password}@{target.host}:{target.port}/{target.database}"
        )

    def client(self, target: MysqlTarget) -> float:
        """The mariadb client, one process fed every file in order (password in its environment)."""
        argv = [find_binary("mariadb"), "-h", target.host, "-P", str(target.port), "-u",
                target.user, target.database]  # fmt: skip
        files = sorted(self.folder.glob("V*.sql"), key=lambda p: int(p.name[1:].split("__")[0]))
        started = time.perf_counter()
        with subprocess.Popen(
            argv, stdin=subprocess.PIPE, env=os.environ | {"MYSQL_PWD": self.password}
        ) as proc:
            assert proc.stdin is not None
            for path in files:
                proc.stdin.write(path.read_bytes())
            proc.stdin.close()
            assert proc.wait() == 0, "the mariadb client failed"
        return time.perf_counter() - started

    def runner_argv(self) -> list[str]:
        return [PYTHON, "flows/run.py", "migrate", "--dir", str(self.folder)]

    def runner_env(self, target: MysqlTarget) -> dict[str, str]:
        return os.environ | {"STACKFLOW_DATABASE_URL": self.url(target)}

    def runner(self, target: MysqlTarget) -> float:
        """`python flows/run.py migrate`, the whole command."""
        started = time.perf_counter()
        done = subprocess.run(self.runner_argv(), cwd=ROOT, env=self.runner_env(target),
                              capture_output=True, text=True, check=False)  # fmt: skip
        elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stderr
        return elapsed

    def own(self, target: MysqlTarget) -> float:
        """The runner's own time: the migrate command in this (warm) process."""
        started = time.perf_counter()
        report = migrate(target, MigrationSettings(dir=self.folder), protected=False)
        assert len(report.applied) == 2
        return time.perf_counter() - started

    def rows(self, target: MysqlTarget) -> tuple[int, int]:
        with connect(target, MigrationSettings()) as conn, conn.cursor() as cur:
            cur.execute("SELECT (SELECT COUNT(*) FROM employees), (SELECT COUNT(*) FROM salaries)")
            row = cur.fetchone()
        return int(row[0]), int(row[1])  # type: ignore[index]


def _statements_done(cur: Any, database: str) -> int:
    """How far the data file's run is, as its history row says (0 before it started)."""
    cur.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = 'stackflow_schema_history'",
        (database,),
    )
    if not cur.fetchone()[0]:
        return 0
    cur.execute(
        f"SELECT statements_done FROM `{database}`.stackflow_schema_history WHERE version = '2'"
    )
    row = cur.fetchone()
    return int(row[0]) if row else 0


def guarantees(bench: Bench, expected: tuple[int, int]) -> dict[str, Any]:
    """Kill a run mid-file with SIGKILL; then two runners at once: one resumes at the next
    statement under the lock, the other waits for it and finds nothing to do; every row once."""
    target = bench.fresh()
    proc = subprocess.Popen(bench.runner_argv(), cwd=ROOT, env=bench.runner_env(target),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    killed_after = 0
    try:
        with connect(bench.target, MigrationSettings()) as conn, conn.cursor() as cur:
            deadline = time.monotonic() + 120
            while not killed_after and proc.poll() is None and time.monotonic() < deadline:
                done = _statements_done(cur, target.database)
                if done >= 9:  # past the first INSERTs, inside the LOCK TABLES region
                    os.kill(proc.pid, signal.SIGKILL)
                    killed_after = done
                time.sleep(0.005)  # a benchmark's poll, not a test's wait
    finally:
        if proc.poll() is None and not killed_after:
            proc.kill()
        proc.wait(30)
    assert killed_after, "the run ended before it could be killed mid-file"
    both = [
        subprocess.Popen(
            bench.runner_argv(),
            cwd=ROOT,
            env=bench.runner_env(target),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in both]
    resumed = [int(m[1]) for out in outputs if (m := re.search(r"resumed at (\d+)", out))]
    idle = [out for out in outputs if ": 0 applied, 2 already applied" in out]
    rows = bench.rows(target)
    with connect(target, MigrationSettings()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM stackflow_schema_history WHERE CHAR_LENGTH(checksum) = 64"
        )
        checksums = int(cur.fetchone()[0])  # type: ignore[index]
    return {
        "killed_after_statement": killed_after,
        "resumed_at_statement": resumed[0] if len(resumed) == 1 else resumed,
        "second_runner_waited_and_found_nothing": len(idle) == 1,
        "rows_after_resume": list(rows),
        "rows_expected": list(expected),
        "checksums_recorded": checksums,
        "ok": resumed == [killed_after + 1]
        and len(idle) == 1
        and rows == expected
        and checksums == 2,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--employees", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    load_before = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="stackflow-bulk-") as tmp:
        base = Path(tmp)
        folder = base / "migrations"
        counts = generate(folder, args.employees)
        megabytes = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        bench = Bench(base, folder)
        try:
            client, runner, own = [], [], []
            for n in range(args.rounds):  # alternating order: neither always runs first
                pair = [(client, bench.client), (runner, bench.runner)]
                for figures, tool in pair if n % 2 == 0 else pair[::-1]:
                    target = bench.fresh()
                    figures.append(tool(target))
                    assert bench.rows(target) == (counts["employees"], counts["salaries"])
                own.append(bench.own(bench.fresh()))
            checked = guarantees(bench, (counts["employees"], counts["salaries"]))
        finally:
            stop_local_mariadb(base / "mariadb")
    c, w, o = statistics.median(client), statistics.median(runner), statistics.median(own)
    result = {
        "rows": sum(counts.values()),
        "megabytes": round(megabytes, 1),
        "rounds": args.rounds,
        "mariadb_client_s": round(c, 3),
        "runner_command_s": round(w, 3),
        "runner_own_s": round(o, 3),
        "ratio": round(w / c, 2),
        "client_s_each": [round(x, 3) for x in client],
        "runner_s_each": [round(x, 3) for x in runner],
        "guarantees": checked,
        "load_average_1m_at_start": load_before,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "command": ".venv/bin/python bench/bulk_migrations.py",
        **{k: v for k, v in run_metadata().items() if k in ("timestamp", "cores", "versions")},
    }
    width = 44
    print(f"bulk migration: {result['rows']:,} rows in {megabytes:.1f} MB, median of {args.rounds}")
    print(f"{'mariadb client (whole command)':<{width}} {c:6.2f} s")
    print(f"{'python flows/run.py migrate (whole command)':<{width}} {w:6.2f} s  ({w / c:.2f}x)")
    print(f"{'  of which the runner itself (in-process)':<{width}} {o:6.2f} s")
    print(f"{'  Python start, imports, settings':<{width}} {max(w - o, 0):6.2f} s")
    g = checked
    print(
        f"kill -9 after statement {g['killed_after_statement']}: resumed at statement "
        f"{g['resumed_at_statement']}; a second runner at once waited for the lock and found "
        f"nothing to do: {g['second_runner_waited_and_found_nothing']}; rows "
        f"{g['rows_after_resume']} (expected {g['rows_expected']}); "
        f"{g['checksums_recorded']} checksums recorded: {'ok' if g['ok'] else 'NOT OK'}"
    )
    print(f"load average {load_before} at start, {result['load_average_1m']} at the end")
    if not args.no_save:
        merge_results({KEY: result})
        print(f"saved under {KEY!r} in bench/results.json")
    return 0 if g["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
