"""`status` in Prometheus's text exposition format (node_exporter's textfile collector reads it
from a file; `status --prometheus FILE` writes one): what alerts need. Times are Unix seconds, so
a rule compares them with `time()` and a file written a while ago still says the truth; each
metric is listed, with the alert it serves, in docs/reference/metrics.md.

A metric whose value is unknown (no verify ran, no branch followed) is left out rather than
written as 0, so an alert on it never fires on what was never measured.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from stackflow.status.condition import ACTIVE, Condition
from stackflow.status.report import EnvironmentStatus

REASON_CHARS = 200  # a label holds the refusal's reason, cut: series labels stay short


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: object) -> str:
    return ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Text:
    """Metric families in the exposition format: HELP and TYPE once, then the samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(
        self, name: str, help_text: str, samples: Iterable[tuple[dict[str, object], float]]
    ) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for labels, value in samples:
            self.lines.append(f"{name}{{{_labels(**labels)}}} {_number(value)}")


def prometheus(environments: list[EnvironmentStatus], now: float | None = None) -> str:
    """Every environment's status as Prometheus gauges (see the module)."""
    now = time.time() if now is None else now
    envs = environments
    out = _Text()
    out.lines += [
        "# HELP stackflow_status_timestamp_seconds When this file was written.",
        "# TYPE stackflow_status_timestamp_seconds gauge",
        f"stackflow_status_timestamp_seconds {_number(round(now, 3))}",
    ]
    out.family(
        "stackflow_stacks_active",
        "Stacks that are deployed, by environment.",
        (
            ({"environment": e.environment}, sum(s.condition in ACTIVE for s in e.stacks))
            for e in envs
        ),
    )
    out.family(
        "stackflow_stacks_failing",
        "Stacks whose last operation failed, by environment.",
        (
            ({"environment": e.environment}, sum(s.condition is Condition.FAILED for s in e.stacks))
            for e in envs
        ),
    )
    out.family(
        "stackflow_stack_condition",
        "1 for each stack's current condition.",
        (
            ({"environment": e.environment, "stack": s.stack, "condition": s.condition}, 1)
            for e in envs
            for s in e.stacks
        ),
    )
    out.family(
        "stackflow_environment_condition",
        "1 for each environment's condition (its stacks' worst).",
        (({"environment": e.environment, "condition": e.condition}, 1) for e in envs),
    )
    out.family(
        "stackflow_environment_ready",
        "1 when the environment is ready (deployed, last operations succeeded), else 0.",
        (({"environment": e.environment}, int(e.condition is Condition.READY)) for e in envs),
    )
    out.family(
        "stackflow_stack_last_success_timestamp_seconds",
        "When the stack's last operation that succeeded ended.",
        (
            ({"environment": e.environment, "stack": s.stack}, s.last_success_at)
            for e in envs
            for s in e.stacks
            if s.last_success_at
        ),
    )
    out.family(
        "stackflow_stack_last_failure_timestamp_seconds",
        "When the stack's last operation that failed ended.",
        (
            ({"environment": e.environment, "stack": s.stack}, s.last_failure["at"])
            for e in envs
            for s in e.stacks
            if s.last_failure and s.last_failure.get("at")
        ),
    )
    _gitops(out, envs)
    _health(out, envs)
    _drift(out, envs)
    out.family(
        "stackflow_environment_expires_timestamp_seconds",
        "When an ephemeral environment's TTL passes (the cleanup destroys it then).",
        (({"environment": e.environment}, e.expires_at) for e in envs if e.expires_at),
    )
    out.family(
        "stackflow_records_damaged",
        "1 for each environment with a record that cannot be read.",
        (({"environment": e.environment}, 1) for e in envs if e.damaged),
    )
    out.family(
        "stackflow_migrations_version",
        "The schema's migrations version, by environment.",
        (
            ({"environment": e.environment}, e.migrations_version)
            for e in envs
            # a dotted version (2.0.1) is no number: the _info metric carries it
            if isinstance(e.migrations_version, int)
        ),
    )
    out.family(
        "stackflow_migrations_version_info",
        "The schema's migrations version as text (12, 2.0.1), by environment.",
        (
            ({"environment": e.environment, "version": e.migrations_version}, 1)
            for e in envs
            if e.migrations_version is not None
        ),
    )
    return "\n".join(out.lines) + "\n"


def _gitops(out: _Text, envs: list[EnvironmentStatus]) -> None:
    """Where each environment that follows a branch stands against it."""
    following = [(e, e.branch) for e in envs if e.branch is not None]
    out.family(
        "stackflow_gitops_info",
        "1 per environment that follows a branch: the branch, its head and the commit deployed.",
        (
            (
                {
                    "environment": e.environment,
                    "branch": b["name"],
                    "head": b["head"] or "",
                    "deployed": b["deployed"] or "",
                },
                1,
            )
            for e, b in following
        ),
    )
    out.family(
        "stackflow_gitops_behind_seconds",
        "How long the environment has not been at its branch's head (0: it is).",
        (
            ({"environment": e.environment, "branch": b["name"]}, b["behind_s"])
            for e, b in following
        ),
    )
    out.family(
        "stackflow_gitops_behind_since_timestamp_seconds",
        "Since when the environment has not been at its branch's head (only while behind).",
        (
            ({"environment": e.environment, "branch": b["name"]}, b["behind_since"])
            for e, b in following
            if b["behind_since"]
        ),
    )
    out.family(
        "stackflow_gitops_commit_refused",
        "1 while the branch's head is held: refused, rejected or expired (the reason in a label).",
        (
            (
                {
                    "environment": e.environment,
                    "branch": b["name"],
                    "commit": str(b["refused"]["commit"])[:12],
                    "result": b["refused"]["result"],
                    "reason": " ".join(str(b["refused"]["reason"]).split())[:REASON_CHARS],
                },
                1,
            )
            for e, b in following
            if b["refused"]
        ),
    )
    out.family(
        "stackflow_gitops_failures",
        "Attempts of the branch's commit that failed in a row (retried with back-off).",
        (
            ({"environment": e.environment, "branch": b["name"]}, b["failures"])
            for e, b in following
        ),
    )


def _health(out: _Text, envs: list[EnvironmentStatus]) -> None:
    """The app's health as the last verify step found it."""
    checked = [(e, e.health) for e in envs if e.health is not None]
    out.family(
        "stackflow_app_healthy",
        "1 when the app answered healthy at the last verify, 0 when it did not.",
        (({"environment": e.environment}, int(bool(h.get("healthy")))) for e, h in checked),
    )
    out.family(
        "stackflow_app_health_status_code",
        "The HTTP status the app's health URL answered at the last verify.",
        (({"environment": e.environment}, h["answer"]) for e, h in checked if h.get("answer")),
    )
    out.family(
        "stackflow_app_health_checked_timestamp_seconds",
        "When the last verify asked the app's health URL.",
        (({"environment": e.environment}, h["at"]) for e, h in checked if h.get("at")),
    )


def _drift(out: _Text, envs: list[EnvironmentStatus]) -> None:
    """What the drift checks found, and since when."""
    checked = [(e, e.drift) for e in envs if e.drift is not None]
    out.family(
        "stackflow_drift_checked_timestamp_seconds",
        "When the environment's last drift check ran.",
        (({"environment": e.environment}, d["checked_at"]) for e, d in checked if d["checked_at"]),
    )
    out.family(
        "stackflow_drift_detected",
        "1 for a stack whose last drift check found drift not yet settled by an up or refresh, "
        "0 for a checked stack without.",
        (
            (
                {"environment": e.environment, "stack": s.stack},
                int(s.condition is Condition.DRIFTED),
            )
            for e, d in checked
            for s in e.stacks
            if s.stack in d["checked"] or s.condition is Condition.DRIFTED
        ),
    )
    out.family(
        "stackflow_drift_since_timestamp_seconds",
        "When the drift still there was first found, by stack.",
        (
            ({"environment": e.environment, "stack": stack}, at)
            for e, d in checked
            for stack, at in d["since"].items()
        ),
    )
