"""The local cloud's generic provider servicer, without an engine: the wire format, diffs,
auto-names and the shape of AWS errors (the real engine drives it in tests/integration)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from stackflow.localcloud.errors import FaultInjected
from stackflow.localcloud.plugin import aws_error_text, diff_inputs
from stackflow.localcloud.registry import UNKNOWN, ResourceType, auto_name
from stackflow.localcloud.wire import UNKNOWN_WIRE, from_struct, to_struct

pytestmark = pytest.mark.unit


def _noop(*_: Any) -> Any:
    return None


VPC = ResourceType(
    token="aws:ec2/vpc:Vpc",
    create=_noop,
    read=_noop,
    delete=_noop,
    update=_noop,
    force_new=frozenset({"cidrBlock"}),
)


def test_the_wire_keeps_types_and_turns_unknowns_into_the_engine_sentinel() -> None:
    value = {"n": 3, "f": 1.5, "b": True, "s": "x", "l": [1, "a"], "d": {"k": None}, "u": UNKNOWN}
    struct = to_struct(value)
    assert struct.fields["u"].string_value == UNKNOWN_WIRE
    back = from_struct(struct)
    assert back == value and isinstance(back["n"], int) and back["u"] is UNKNOWN


def test_a_secret_sent_anyway_arrives_as_its_value() -> None:
    struct = to_struct(
        {
            "p": {
                "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                "value": "v",
            }
        }
    )
    assert from_struct(struct) == {"p": "v"}


def test_diff_lists_changes_and_the_force_new_ones_and_treats_missing_as_empty() -> None:
    olds = {"cidrBlock": "10.0.0.0/16", "tags": {"a": "1"}, "enableDnsSupport": True, "x": None}
    news = {"cidrBlock": "10.1.0.0/16", "tags": {"a": "2"}, "enableDnsSupport": True}
    assert diff_inputs(VPC, olds, news) == (["cidrBlock", "tags"], ["cidrBlock"])
    assert diff_inputs(VPC, olds, {**olds, "tags": {"a": "1"}}) == ([], [])
    # an unknown (a preview waiting on another resource) is a change
    assert diff_inputs(VPC, olds, {**olds, "cidrBlock": UNKNOWN}) == (["cidrBlock"], ["cidrBlock"])
    # a type without an in-place update replaces on any change
    immutable = ResourceType(token="aws:x/y:Y", create=_noop, read=_noop, delete=_noop)
    assert diff_inputs(immutable, {"a": 1}, {"a": 2}) == (["a"], ["a"])


def test_auto_names_are_stable_for_one_seed_and_differ_between_seeds() -> None:
    first = auto_name("execution-role", b"seed-1")
    assert first == auto_name("execution-role", b"seed-1")
    assert first != auto_name("execution-role", b"seed-2")
    assert first.startswith("execution-role-") and len(first) == len("execution-role-") + 7
    assert len(auto_name("x" * 80, b"s", max_length=64)) == 64


def test_aws_refusals_keep_aws_words_in_pulumi_aws_shape() -> None:
    refusal = ClientError(
        {
            "Error": {"Code": "InvalidParameterCombination", "Message": "Cannot delete protected"},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "req-1"},
        },
        "DeleteDBInstance",
    )
    text = aws_error_text(refusal, "RDS", "deleting", "aws:rds/instance:Instance (mysql)")
    assert text == (
        "deleting aws:rds/instance:Instance (mysql): operation error RDS: DeleteDBInstance, "
        "https response error StatusCode: 400, RequestID: req-1, api error "
        "InvalidParameterCombination: Cannot delete protected"
    )
    knob = aws_error_text(
        FaultInjected("Throttling", "Rate exceeded", "CreateVpc"), "EC2", "creating", "vpc"
    )
    assert (
        "operation error EC2: CreateVpc" in knob and "api error Throttling: Rate exceeded" in knob
    )


def test_a_resource_given_no_inputs_diffs_against_its_empty_old_inputs_not_its_outputs() -> None:
    """An elastic IP the program gives nothing: the engine sends empty old inputs and the old
    outputs; only the inputs count, so a second preview changes nothing."""
    from pulumi.runtime.proto import provider_pb2

    from stackflow.localcloud.plugin.servicer import ProviderServicer
    from stackflow.localcloud.resources import registry

    service = ProviderServicer("aws", registry("aws"), "http://127.0.0.1:1")
    outputs = {"allocationId": "eipalloc-1", "domain": "vpc", "publicIp": "198.51.100.7"}
    request = provider_pb2.DiffRequest(
        id="eipalloc-1",
        urn="urn:pulumi:dev::p::aws:ec2/eip:Eip::ip",
        type="aws:ec2/eip:Eip",
        olds=to_struct(outputs),
        old_inputs=to_struct({}),
        news=to_struct({}),
    )
    answer = service.Diff(request, None)
    assert answer.changes == provider_pb2.DiffResponse.DIFF_NONE, answer
    assert list(answer.replaces) == []


def test_assume_roles_are_read_as_the_engine_sends_them() -> None:
    """A provider's assumeRoles arrive as JSON text, with the program's own keys (snake_case from
    a plain dict, as aws-py-assume-role writes them) or camelCase; a role without an ARN is no
    role to assume."""
    from stackflow.localcloud.plugin.servicer import assume_roles

    arn = "arn:aws:iam::123456789012:role/deployer"
    text = json.dumps([{"role_arn": arn, "session_name": "s", "externalId": "x"}, {"x": 1}])
    assert assume_roles(text) == ({"roleArn": arn, "sessionName": "s", "externalId": "x"},)
    assert assume_roles([{"roleArn": arn}]) == ({"roleArn": arn},)
    assert assume_roles("not json") == () and assume_roles(None) == ()
