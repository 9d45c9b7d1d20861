"""The combined plan an approval covers (no servers): when it is empty, what it pins, what a
re-preview may still do under it, how it reads; and the retry delays a run draws."""

from __future__ import annotations

import pytest

from flows.pipeline import retry_delays
from stackflow.engine.base import ChangeCounts, PropertyChange, ResourceChange
from stackflow.migrator.lint import LintFinding
from stackflow.migrator.plan import MigrationPlanReport, PendingMigration
from stackflow.plan import DeployPlan, PlanStatus, StackPlan, migrations_dict
from stackflow.settings import get_settings

pytestmark = pytest.mark.unit
URN = "urn:pulumi:prod-1::stackflow-app::aws:ecs/service:Service::app"


def change(kind: str, *props: str, urn: str = URN) -> ResourceChange:
    return ResourceChange(
        urn,
        "aws:ecs/service:Service",
        "app",
        kind,
        tuple(PropertyChange(p, "update", False, 1, 2) for p in props),
    )


def app_plan(*resources: ResourceChange) -> StackPlan:
    counts = ChangeCounts(update=sum(r.change == "update" for r in resources))
    return StackPlan("app", PlanStatus.CHANGES, counts, resources)


def test_a_re_preview_may_resolve_values_but_not_change_more() -> None:
    plan = app_plan(change("update", "desiredCount", "taskDefinition"))
    assert plan.allows(change("update", "desiredCount"))  # fewer properties, values resolved
    assert plan.allows(change("update", "desiredCount", "taskDefinition"))
    assert not plan.allows(change("update", "desiredCount", "cpu"))  # a property not shown
    assert not plan.allows(change("replace", "desiredCount"))  # a larger change
    assert not plan.allows(change("update", "desiredCount", urn=URN + "2"))  # another resource
    replace = app_plan(change("replace", "cpu"))
    assert replace.allows(change("update", "cpu"))  # Pulumi lets an update stand for a replace
    assert not replace.allows(change("delete"))


def test_a_re_preview_resolves_only_what_the_plan_did_not_know() -> None:
    """Values an upstream stack's update decides ("known after apply" in the plan) may resolve to
    anything, down to the keys inside them; a value the plan showed must stay that value."""
    unknown = "(known after apply)"

    def prop(name: str, new: object) -> PropertyChange:
        return PropertyChange(name, "update", False, None, new)

    def one(*props: PropertyChange) -> ResourceChange:
        return ResourceChange(URN, "aws:ecs/service:Service", "app", "update", props)

    plan = app_plan(
        one(
            prop("networkConfiguration.subnets", ["s-a", "s-b", unknown]),
            prop("desiredCount", 2),
            prop("containerDefinitions", unknown),
        )
    )
    resolved = prop("networkConfiguration.subnets", ["s-a", "s-b", "s-c"])
    assert plan.allows(one(resolved, prop("desiredCount", 2)))
    assert plan.allows(one(prop("containerDefinitions[0].environment[0].value", "3307")))
    assert not plan.allows(one(prop("desiredCount", 3)))  # shown as 2
    assert not plan.allows(one(prop("networkConfiguration.subnets", ["s-x", "s-b", "s-c"])))
    assert not plan.allows(one(prop("networkConfiguration.subnets", ["s-a", "s-b"])))
    assert not plan.allows(one(prop("desiredCount.inner", 1)))  # inside a value it showed

    def made(kind: str, *props: PropertyChange) -> ResourceChange:
        return ResourceChange(URN, "aws:iam/role:Role", "role", kind, props)

    # a new resource's generated name differs from one preview to the next: not held to values
    created = app_plan(made("create", prop("name", "role-1a2b")))
    assert created.allows(made("create", prop("name", "role-9f8e"), prop("path", "/")))
    replaced = app_plan(made("replace", prop("name", "role-1a2b"), prop("defs", unknown)))
    assert replaced.allows(made("replace", prop("name", "role-9f8e"), prop("defs[0].x", 1)))
    assert not replaced.allows(made("replace", prop("path", "/")))  # a property it did not name


def migrations(*pending: PendingMigration) -> MigrationPlanReport:
    return MigrationPlanReport("127.0.0.9:3306/app", list(pending), 3, True)


DROP = PendingMigration(
    4,
    "V004__drop_old.sql",
    "drop old",
    "ab" * 32,
    ["DROP TABLE old_things", "SELECT 1"],
    [LintFinding("drop_table", 1, "DROP TABLE old_things", False)],
)


def test_the_plan_is_empty_only_without_changes_and_pending_files() -> None:
    quiet = StackPlan("networking", PlanStatus.UNCHANGED)
    assert DeployPlan("prod-1", "local cloud", (quiet,)).empty
    assert DeployPlan("prod-1", "local cloud", (quiet,), migrations()).empty
    assert not DeployPlan("prod-1", "local cloud", (quiet,), migrations(DROP)).empty
    assert not DeployPlan("prod-1", "local cloud", (app_plan(change("update", "x")),)).empty
    assert DeployPlan("prod-1", "local cloud", (quiet,), migrations(DROP)).pinned == {
        "V4": "ab" * 32
    }


def test_the_plan_reads_the_same_on_the_terminal_in_markdown_and_as_data() -> None:
    plan = DeployPlan(
        "prod-1",
        "local cloud",
        (StackPlan("networking", PlanStatus.UNCHANGED), app_plan(change("update", "desiredCount"))),
        migrations(DROP),
        round=2,
        why_again="the pending migrations changed while the approval waited (added: V4)",
    )
    text = "\n".join(plan.lines())
    assert "plan for prod-1  [local cloud: moto on loopback, nothing is deployed to AWS]" in text
    assert "asked again (round 2): the pending migrations changed" in text
    assert "prod-1/app: 0 to create, 1 to update, 0 to replace, 0 to delete" in text
    assert "desiredCount: 1 => 2" in text
    assert "! DESTRUCTIVE: statement 1: drop table: DROP TABLE old_things" in text
    md = plan.markdown()
    assert md.startswith("# Plan for `prod-1`\n\nOn the **local cloud**")
    assert "| app | changes | 0 | 1 | 0 | 0 | — |" in md
    assert "| app | update | `aws:ecs/service:Service` | app | desiredCount: 1 => 2 |" in md
    assert (
        "| `V004__drop_old.sql` | 2 | `abababababab` | **DESTRUCTIVE** statement 1: drop table: "
        "`DROP TABLE old_things` |" in md
    )
    assert "1. `DROP TABLE old_things`" in md  # the statements follow the table
    data = migrations_dict(plan.migrations)  # what --json, the summaries and events carry
    assert data is not None and data["pending"][0]["statements"] == DROP.statements
    assert data["pending"][0]["findings"][0]["allowed"] is False
    assert plan.stack("app") is not None and plan.stack("app").resources[0].urn == URN  # type: ignore[union-attr]
    assert migrations_dict(None, "not read: database down") == {
        "note": "not read: database down",
        "pending": [],
    }


def test_statements_the_lint_cannot_check_read_needs_review_everywhere() -> None:
    call = PendingMigration(
        5,
        "V005__fill.sql",
        "fill",
        "cd" * 32,
        ["CALL fill(3)"],
        [LintFinding("procedure_call", 1, "CALL fill(3)", False, "the lint cannot see inside")],
    )
    plan = DeployPlan(
        "prod-1", "local cloud", (StackPlan("app", PlanStatus.UNCHANGED),), migrations(call)
    )
    finding = "statement 1: procedure call (the lint cannot see inside)"
    assert f"! NEEDS REVIEW: {finding}: CALL fill(3)" in "\n".join(plan.lines())
    assert f"**NEEDS REVIEW** {finding}: `CALL fill(3)`" in plan.markdown()
    data = migrations_dict(plan.migrations)
    assert data is not None and data["pending"][0]["findings"][0]["needs_review"] is True
    assert plan.migrations is not None and len(plan.migrations.blocking) == 1  # it asks approval


def test_each_run_draws_retry_delays_around_the_doubling_setting() -> None:
    settings = get_settings(retry_delay_s=4.0, stack_retries=3)
    draws = [retry_delays(settings) for _ in range(20)]
    for delays in draws:
        assert len(delays) == 3
        for delay, base in zip(delays, (4.0, 8.0, 16.0), strict=True):
            assert 0.5 * base <= delay <= 1.5 * base
    assert len({tuple(d) for d in draws}) > 1  # jittered: two runs on one lock drift apart
    assert retry_delays(get_settings(retry_delay_s=0.0)) == [0.0, 0.0, 0.0]
