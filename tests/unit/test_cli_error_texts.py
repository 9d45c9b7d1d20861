"""Error classification against real Pulumi CLI texts (tests/fixtures/cli_texts).

Each fixture is what the Automation API raised when the real CLI failed one way against the local
cloud; `tests/fixtures/capture_cli_texts.py` captured it and says how. `DOCUMENTED` below is how
each must classify: when the CLI's words change and a fixture is re-captured, a test here fails
until the classifier (stackflow.engine.classify) follows. AWS's refusals classify on AWS's error
code inside pulumi-aws's shape, whatever the words around it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version

import pulumi.automation as auto
import pytest
from botocore.exceptions import ClientError

from stackflow.engine.classify import (
    classify,
    diagnose,
    is_lock_conflict,
    is_transient_error,
)
from stackflow.engine.diagnosis import (
    CREDENTIALS_CODES,
    THROTTLING_CODES,
    TRANSIENT_CODES,
    aws_errors,
)
from stackflow.errors import PermanentStackError, TransientStackError
from stackflow.localcloud.knobs import Fault
from stackflow.localcloud.plugin import FaultInjected, aws_error_text
from stackflow.redact import Redactor
from tests.fixtures.capture_cli_texts import CASES, FIXTURE_DIR, CliText, fixtures

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Documented:
    transient: bool
    category: str
    reason_says: tuple[str, ...] = ()


# The one table: every fixture, how it must classify, and what its reason must name.
DOCUMENTED = {
    "lock-held": Documented(True, "lock", ("another update holds the stack's lock",)),
    "wrong-passphrase": Documented(False, "passphrase", ("STACKFLOW_STATE_PASSPHRASE",)),
    "passphrase-missing": Documented(False, "passphrase", ("STACKFLOW_STATE_PASSPHRASE",)),
    "config-missing": Documented(False, "config", ("config value is missing",)),
    "program-error": Documented(False, "program", ("the Pulumi program failed",)),
    "plugin-missing": Documented(False, "plugin-missing", ("pulumi-resource-aws v",)),
    "plugin-crash": Documented(False, "plugin-crash", ("pulumi-resource-aws crashed",)),
    "aws-throttling": Documented(True, "aws-throttled", ("Throttling on EC2 CreateVpc",)),
    "aws-invalid-parameter": Documented(
        False, "aws-refused", ("InvalidVpc.Range on EC2 CreateVpc",)
    ),
    "aws-auth-failure": Documented(
        False, "aws-credentials", ("AuthFailure on EC2 CreateVpc", "STACKFLOW_AWS_PROFILE")
    ),
    "plan-violated": Documented(False, "plan-changed", ("approved update plan does not allow",)),
    "plan-unexpected-step": Documented(
        False, "plan-changed", ("approved update plan does not allow",)
    ),
}
FIXTURES = fixtures()


def text_of(case: str) -> CliText:
    return FIXTURES[case]


# --- the fixtures ---------------------------------------------------------------------------------


def test_every_fixture_is_documented_and_every_documented_case_has_a_fixture() -> None:
    assert sorted(FIXTURES) == sorted(DOCUMENTED)
    assert sorted(CASES) == sorted(DOCUMENTED)  # and the capture script makes each of them
    assert all(path.suffix == ".txt" for path in FIXTURE_DIR.iterdir() if path.is_file())


@pytest.mark.parametrize("case", sorted(DOCUMENTED))
def test_fixture_classifies_as_documented(case: str) -> None:
    documented = DOCUMENTED[case]
    exc = text_of(case).command_error()

    diagnosis = diagnose(exc)
    assert (diagnosis.category, diagnosis.transient) == (documented.category, documented.transient)
    assert is_transient_error(exc) is documented.transient
    error = classify(exc, "dev/networking", Redactor())
    assert isinstance(error, TransientStackError if documented.transient else PermanentStackError)
    assert is_transient_error(error) is documented.transient
    assert error.reason.startswith(diagnosis.reason + ": ")
    for words in documented.reason_says:
        assert words in diagnosis.reason
    assert error.reason != diagnosis.reason + ": "  # the CLI's own lines follow the reason


@pytest.mark.parametrize("case", sorted(DOCUMENTED))
def test_fixture_rebuilds_as_the_exception_the_sdk_raised(case: str) -> None:
    fixture = text_of(case)
    exc = fixture.command_error()
    assert str(exc) == fixture.text
    assert f"{type(exc).__module__}.{type(exc).__qualname__}" == fixture.raised


@pytest.mark.parametrize("case", sorted(DOCUMENTED))
def test_fixture_header_names_its_command_and_the_pinned_cli(case: str) -> None:
    header = text_of(case).header
    assert header["captured by"].endswith(f"-m tests.fixtures.capture_cli_texts {case}")
    # Another CLI version may print other words: re-capture after a bump of the pulumi pin.
    assert header["pulumi CLI"].startswith(f"v{version('pulumi')} ")
    assert header["date"] and header["replaced"]


def test_a_violated_plan_is_plan_changed_and_never_repeats_the_values_pulumi_printed() -> None:
    """Pulumi prints both values of a property that differs from the plan, secrets included
    (here a tag made with Output.secret): the error keeps the property's name, never a value,
    even when the redactor does not know them."""
    from stackflow.errors import PlanChanged
    from tests.fixtures.capture_cli_texts import ACTUAL_SECRET, PLANNED_SECRET

    fixture = text_of("plan-violated")
    assert PLANNED_SECRET in fixture.text and ACTUAL_SECRET in fixture.text  # as Pulumi said it
    error = classify(fixture.command_error(), "prod/networking", Redactor())
    assert isinstance(error, PlanChanged)
    assert "violates plan: properties changed: tags (values not shown)" in error.reason
    assert PLANNED_SECRET not in str(error) and ACTUAL_SECRET not in str(error)
    step = classify(text_of("plan-unexpected-step").command_error(), "prod/app", Redactor())
    assert isinstance(step, PlanChanged)
    assert "create is not allowed by the plan: no steps were expected" in step.reason


def test_a_program_error_carries_what_the_program_raised_as_python_printed_it() -> None:
    """The error names the program's own exception, its type and message as the traceback's last
    line says them; an error of another kind carries none."""
    from stackflow.engine.classify import program_raised
    from stackflow.errors import ProgramFailed

    error = classify(text_of("program-error").command_error(), "dev/networking", Redactor())
    assert isinstance(error, ProgramFailed)
    assert error.raised == "ValueError: the capture's program fails on purpose"
    untyped = "error: python inline source runtime error: no type line follows\n"
    assert program_raised(untyped) == "no type line follows"
    assert program_raised(text_of("aws-throttling").text) is None
    throttled = classify(text_of("aws-throttling").command_error(), "dev/networking", Redactor())
    assert not isinstance(throttled, ProgramFailed)


def test_only_the_lock_fixture_is_a_lock_conflict() -> None:
    assert [case for case in DOCUMENTED if is_lock_conflict(text_of(case).command_error())] == [
        "lock-held"
    ]


# --- AWS's errors: the code decides, never the words ----------------------------------------------

THROTTLED = text_of("aws-throttling").text
# Our plugin's words around AWS's error, and pulumi-aws's (terraform-provider-aws through the
# bridge) for the same call.
PLUGIN_PREFIX = "creating aws:ec2/vpc:Vpc (vpc): "
PULUMI_AWS_PREFIX = "sdk-v2/provider2.go:520: sdk.helper_schema: creating EC2 VPC: "


def shape(code: str, message: str = "m", *, status: int = 400, call: str = "EC2: CreateVpc") -> str:
    return (
        f"    error: creating EC2 VPC: operation error {call}, https response error StatusCode: "
        f"{status}, RequestID: 0f2c, api error {code}: {message}"
    )


def cli_error(stdout: str, stderr: str = "") -> auto.CommandError:
    return auto.errors.create_command_error(auto.CommandResult(stdout, stderr, 1))


def test_the_throttling_fixture_has_one_aws_error_and_its_parts() -> None:
    [error] = aws_errors(THROTTLED)
    assert (error.service, error.operation, error.status, error.code) == (
        "EC2",
        "CreateVpc",
        400,
        "Throttling",
    )


def test_same_code_with_other_words_classifies_the_same() -> None:
    assert PLUGIN_PREFIX in THROTTLED
    reworded = THROTTLED.replace(PLUGIN_PREFIX, PULUMI_AWS_PREFIX).replace(
        "Rate exceeded", "Request rate too high; slow down and try again"
    )
    original = diagnose(text_of("aws-throttling").command_error())
    assert diagnose(cli_error(reworded)) == original


def test_our_plugin_words_without_the_aws_shape_do_not_decide() -> None:
    # The plugin's own text for an error that is not AWS's, with AWS-sounding words in it.
    for text in (
        f"error: {PLUGIN_PREFIX}Throttling: Rate exceeded",
        f"error: {PLUGIN_PREFIX}refused by the local cloud's fault knobs",
        "error: Rate exceeded; TooManyRequestsException; RequestLimitExceeded",
        "error: AccessDenied ExpiredToken InvalidClientTokenId",
    ):
        diagnosis = diagnose(cli_error(text))
        assert (diagnosis.category, diagnosis.transient) == ("unknown", False), text


def test_the_message_does_not_decide_the_code_does() -> None:
    refused = diagnose(cli_error(shape("InvalidParameterValue", "Rate exceeded, Throttling")))
    assert (refused.category, refused.transient) == ("aws-refused", False)
    throttled = diagnose(cli_error(shape("Throttling", "AccessDenied: InvalidParameterValue")))
    assert (throttled.category, throttled.transient) == ("aws-throttled", True)


@pytest.mark.parametrize("code", sorted(THROTTLING_CODES))
def test_throttling_codes_are_transient(code: str) -> None:
    diagnosis = diagnose(cli_error(shape(code)))
    assert (diagnosis.category, diagnosis.transient) == ("aws-throttled", True)
    assert f"{code} on EC2 CreateVpc" in diagnosis.reason


@pytest.mark.parametrize("code", sorted(TRANSIENT_CODES))
def test_transient_codes_are_transient(code: str) -> None:
    diagnosis = diagnose(cli_error(shape(code, status=400)))
    assert (diagnosis.category, diagnosis.transient) == ("aws-unavailable", True)


@pytest.mark.parametrize("code", sorted(CREDENTIALS_CODES))
def test_credentials_codes_are_permanent_and_name_the_setting(code: str) -> None:
    diagnosis = diagnose(cli_error(shape(code, status=403, call="STS: GetCallerIdentity")))
    assert (diagnosis.category, diagnosis.transient) == ("aws-credentials", False)
    assert f"{code} on STS GetCallerIdentity" in diagnosis.reason
    assert "STACKFLOW_AWS_PROFILE" in diagnosis.reason


@pytest.mark.parametrize(
    ("status", "category", "transient"),
    [
        (500, "aws-unavailable", True),
        (502, "aws-unavailable", True),
        (503, "aws-unavailable", True),
        (429, "aws-throttled", True),
        (400, "aws-refused", False),
        (404, "aws-refused", False),
    ],
)
def test_an_unknown_code_is_judged_by_its_http_status(
    status: int, category: str, transient: bool
) -> None:
    diagnosis = diagnose(cli_error(shape("SomethingNew", status=status)))
    assert (diagnosis.category, diagnosis.transient) == (category, transient)


def test_a_status_without_an_api_error_is_judged_by_the_status() -> None:
    text = (
        "error: operation error RDS: CreateDBInstance, https response error StatusCode: 503, "
        "RequestID: , deserialization failed, failed to decode response body"
    )
    diagnosis = diagnose(cli_error(text))
    assert (diagnosis.category, diagnosis.transient) == ("aws-unavailable", True)
    assert "HTTP 503 on RDS CreateDBInstance" in diagnosis.reason


def test_an_aws_sdk_that_retried_to_its_limit_is_read_the_same() -> None:
    text = (
        "error: creating RDS DB Instance: operation error RDS: CreateDBInstance, exceeded maximum "
        "number of attempts, 25, https response error StatusCode: 400, RequestID: 9c1e, api error "
        "Throttling: Rate exceeded"
    )
    diagnosis = diagnose(cli_error(text))
    assert (diagnosis.category, diagnosis.transient) == ("aws-throttled", True)
    assert "Throttling on RDS CreateDBInstance" in diagnosis.reason


def test_no_http_answer_is_left_to_the_network_rules() -> None:
    text = (
        "error: operation error EC2: CreateVpc, https response error StatusCode: 0, RequestID: , "
        'request send failed, Post "https://ec2.eu-west-1.amazonaws.com/": dial tcp: lookup '
        "ec2.eu-west-1.amazonaws.com: no such host"
    )
    assert aws_errors(text) == []
    diagnosis = diagnose(cli_error(text))
    assert (diagnosis.category, diagnosis.transient) == ("network", True)


def test_a_refusal_a_retry_cannot_fix_outweighs_throttling_in_one_update() -> None:
    text = "\n".join(
        (shape("Throttling"), shape("InvalidParameterValue", call="RDS: CreateDBSubnetGroup"))
    )
    diagnosis = diagnose(cli_error(text))
    assert (diagnosis.category, diagnosis.transient) == ("aws-refused", False)
    assert "InvalidParameterValue on RDS CreateDBSubnetGroup" in diagnosis.reason
    with_credentials = text + "\n" + shape("ExpiredToken", call="STS: GetCallerIdentity")
    assert diagnose(cli_error(with_credentials)).category == "aws-credentials"


def test_an_aws_refusal_inside_a_program_error_is_aws_not_the_program() -> None:
    # A data-source call (invoke) that AWS refuses fails the program: the SDK types it RuntimeError.
    stdout = (
        "    error: an unhandled error occurred: invocation of aws:index/getAvailabilityZones:"
        "getAvailabilityZones returned an error: invoking aws:index/getAvailabilityZones:"
        "getAvailabilityZones: operation error EC2: DescribeAvailabilityZones, https response "
        "error StatusCode: 503, RequestID: 77ab, api error Unavailable: The service is unavailable."
    )
    exc = cli_error(stdout)
    assert isinstance(exc, auto.RuntimeError)
    diagnosis = diagnose(exc)
    assert (diagnosis.category, diagnosis.transient) == ("aws-unavailable", True)


def test_pulumi_aws_without_any_credentials_names_the_setting() -> None:
    # pulumi-aws's own words when it finds no credentials (pulumi/pulumi-aws#3310); it makes no AWS
    # call, so there is no code. Not a fixture: the local cloud's plugin never says this.
    stdout = (
        "    error: pulumi:providers:aws resource 'default_7_51_1' has a problem: No valid "
        "credential sources found.\n    Please see https://www.pulumi.com/registry/packages/aws/"
        "installation-configuration/ for more information about providing credentials."
    )
    diagnosis = diagnose(cli_error(stdout))
    assert (diagnosis.category, diagnosis.transient) == ("aws-credentials", False)
    assert "STACKFLOW_AWS_PROFILE" in diagnosis.reason


# --- the local cloud's plugin and knobs speak in the shape the classifier reads --------------------


@pytest.mark.parametrize(("kind", "transient"), [("transient", True), ("permanent", False)])
def test_a_knob_fault_in_the_plugins_shape_classifies_as_its_kind(
    kind: str, transient: bool
) -> None:
    answer = Fault.model_validate({"kind": kind}).answer()
    fault = FaultInjected(answer["code"], answer["message"], "CreateDBInstance")
    text = aws_error_text(fault, "RDS", "creating", "aws:rds/instance:Instance (db)")
    assert diagnose(cli_error(f"    error: {text}")).transient is transient


def test_a_moto_refusal_in_the_plugins_shape_classifies_on_its_code() -> None:
    refusal = ClientError(
        {
            "Error": {"Code": "ServiceUnavailable", "Message": "Please try again"},
            "ResponseMetadata": {"HTTPStatusCode": 503, "RequestId": "req-1"},
        },
        "CreateDBInstance",
    )
    text = aws_error_text(refusal, "RDS", "creating", "aws:rds/instance:Instance (db)")
    diagnosis = diagnose(cli_error(f"    error: {text}"))
    assert (diagnosis.category, diagnosis.transient) == ("aws-unavailable", True)
    assert "ServiceUnavailable on RDS CreateDBInstance" in diagnosis.reason


def test_a_race_creating_a_new_postgres_backend_s_table_is_transient() -> None:
    """Two `pulumi` processes opening a brand-new PostgreSQL backend at once: the one that loses
    the race on its table's unique key is retried (the table exists by then), never failed."""
    from stackflow.engine.classify import diagnose

    text = (
        "error: failed to create table pulumi_state: ERROR: duplicate key value violates unique "
        'constraint "pg_type_typname_nsp_index" (SQLSTATE 23505)'
    )
    found = diagnose(RuntimeError(text))
    assert (found.category, found.transient) == ("backend-setup", True)
