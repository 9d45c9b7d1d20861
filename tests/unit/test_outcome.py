"""A node's outcome (`stackflow.outcome`): the status words as the wire keeps them, what each
kind of operation's result says, and the tally of what an operation that ends part-way made."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from stackflow.engine.base import (
    ChangeCounts,
    Operation,
    OutputValue,
    ResourceChange,
    ResourceEvent,
)
from stackflow.engine.events import ROOT_STACK_TYPE, ResourceStatus
from stackflow.outcome import (
    ChangeTally,
    DriftResult,
    NodeOutcome,
    PreviewResult,
    Status,
    UpResult,
    completed,
)

pytestmark = pytest.mark.unit


class Outputs(BaseModel):
    url: str


def test_the_status_words_are_the_ones_records_and_automations_already_read() -> None:
    assert [s.value for s in Status] == [
        "updated",
        "unchanged",
        "previewed",
        "refreshed",
        "destroyed",
        "drift",
        "no-drift",
        "migrated",
        "healthy",
        "checked",
        "skipped",
        "read",
        "not run",
        "stopped",
        "cancelled",
        "failed",
    ]
    assert {s for s in Status if s.unfinished} == {Status.STOPPED, Status.CANCELLED, Status.FAILED}
    assert {s for s in Status if not s.ran} == {Status.SKIPPED, Status.READ, Status.NOT_RUN}
    assert {s for s in Status if s.needs_attention} == {
        Status.STOPPED,
        Status.CANCELLED,
        Status.FAILED,
        Status.DRIFT,
        Status.NOT_RUN,
    }


def test_a_completed_operation_is_named_by_what_it_changed() -> None:
    some, none = ChangeCounts(create=1), ChangeCounts(same=3)
    assert [completed(Operation.UP, c) for c in (some, none)] == [Status.UPDATED, Status.UNCHANGED]
    assert [completed(Operation.DRIFT, c) for c in (some, none)] == [Status.DRIFT, Status.NO_DRIFT]
    assert completed(Operation.PREVIEW, some) is Status.PREVIEWED
    assert completed(Operation.REFRESH, none) is Status.REFRESHED
    assert completed(Operation.DESTROY, some) is Status.DESTROYED


def test_each_kind_of_result_answers_what_a_reader_asks() -> None:
    """An up's outputs are what downstream reads; a preview hands its projection to previews
    and what is deployed to the rest; a stack not deployed yet stands in with its projection."""
    deployed, projected = Outputs(url="http://a"), Outputs(url="http://b")
    secret = {"url": OutputValue("http://a"), "token": OutputValue("s3cret", secret=True)}
    up = NodeOutcome("app", Operation.UP, Status.UPDATED, result=UpResult(secret, deployed))
    assert up.read_by(Operation.PREVIEW) == up.read_by(Operation.UP) == deployed
    assert up.shown_outputs() == {"url": "http://a", "token": "[secret]"}
    assert (up.placeholder, up.resources) == (False, ())

    change = ResourceChange("urn:x", "aws:s3/bucket:Bucket", "b", "update")
    found = PreviewResult((change,), projected, deployed, moves="url changes")
    preview = NodeOutcome("app", Operation.PREVIEW, Status.PREVIEWED, result=found)
    assert preview.read_by(Operation.PREVIEW) == projected
    assert preview.read_by(Operation.UP) == preview.typed == deployed
    assert (preview.placeholder, preview.resources, preview.shown_outputs()) == (
        False,
        (change,),
        {},
    )
    first = NodeOutcome(
        "app", Operation.PREVIEW, Status.PREVIEWED, result=PreviewResult((), projected)
    )
    assert first.placeholder and first.typed == projected

    drift = NodeOutcome("app", Operation.DRIFT, Status.DRIFT, result=DriftResult((change,)))
    assert (drift.resources, drift.typed) == ((change,), None)
    failed = NodeOutcome("app", Operation.UP, Status.FAILED, ChangeCounts(create=2))
    assert (failed.typed, failed.resources, failed.shown_outputs()) == (None, (), {})


def _event(
    urn: str, change: str, status: ResourceStatus, op: Operation = Operation.UP
) -> ResourceEvent:
    kinds = {"stack": ROOT_STACK_TYPE, "provider": "pulumi:providers:aws"}
    return ResourceEvent(
        "app", op, urn, kinds.get(urn, "aws:s3/bucket:Bucket"), urn, change, status
    )


def test_the_tally_counts_each_finished_resource_once_with_its_first_change() -> None:
    """What an up has made: finished steps only (the stack's root as it starts: it is in the
    state from then, and its step ends with the program's outputs), a replace's several steps
    as one, a resource created by one attempt and left alone by the next still created;
    providers, refreshes and a preview's steps never count."""
    tally = ChangeTally()
    events = [
        _event("stack", "create", ResourceStatus.STARTED),
        _event("provider", "create", ResourceStatus.DONE),
        _event("a", "create", ResourceStatus.DONE),
        _event("b", "replace", ResourceStatus.DONE),
        _event("b", "replace", ResourceStatus.DONE),
        _event("c", "update", ResourceStatus.FAILED),
        _event("d", "refresh", ResourceStatus.DONE),
        _event("e", "create", ResourceStatus.DONE, Operation.PREVIEW),
        _event("f", "same", ResourceStatus.DONE),
        # the next attempt: what the first made is the same now
        _event("stack", "same", ResourceStatus.STARTED),
        _event("a", "same", ResourceStatus.DONE),
        _event("c", "update", ResourceStatus.DONE),
    ]
    for event in events:
        tally.add(event)
    assert tally.counts() == ChangeCounts(create=2, update=1, replace=1, same=1)
    gone = ChangeTally()
    gone.add(_event("a", "delete", ResourceStatus.DONE, Operation.DESTROY))
    gone.add(_event("stack", "delete", ResourceStatus.STARTED, Operation.DESTROY))  # not yet
    assert gone.counts() == ChangeCounts(delete=1)
