"""What a failure is (`Diagnosis`), and AWS's refusals read by their error code.

AWS's refusals are classified on AWS's error code inside the shape pulumi-aws prints them in (the
AWS SDK for Go v2's, through the provider), never on the words around it: those are the
provider's (or, on the local cloud, our plugin's), and they change. The codes are the AWS SDKs'
own retry lists (botocore's and the Go SDK's standard retryer: throttling codes, transient codes,
HTTP 429 and 5xx), plus the codes AWS answers for credentials it does not accept. The rest of the
classification (the CLI's and the SDK's own words) is `stackflow.engine.classify`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnosis:
    """What a failure is.

    Attributes:
        category: a short stable name (lock, passphrase, plugin-missing, aws-throttled, ...).
        transient: whether a retry may fix it.
        reason: what people are told, before the CLI's own lines; names the setting at fault.
    """

    category: str
    transient: bool
    reason: str


# --- AWS's errors, by their code -----------------------------------------------------------------


@dataclass(frozen=True)
class AwsError:
    """One AWS refusal as pulumi-aws prints it."""

    service: str
    operation: str
    status: int
    request_id: str
    code: str | None
    message: str

    @property
    def call(self) -> str:
        """The AWS call, e.g. `EC2 CreateVpc`."""
        return f"{self.service} {self.operation}"


_AWS_ERROR = re.compile(
    r"operation error (?P<service>[^:,\n]+): (?P<operation>\w+), "
    r"(?:exceeded maximum number of attempts, \d+, )?"
    r"https response error StatusCode: (?P<status>\d+), RequestID: (?P<request_id>[^,\n]*), "
    r"(?:api error (?P<code>[\w.]+): (?P<message>[^\n]*))?"
)
# botocore/retries/standard.py and aws-sdk-go-v2's aws/retry: retried as throttling.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "EC2ThrottledException",
    }
)
# The same sources' transient codes, and the codes AWS's services answer with a 5xx.
TRANSIENT_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "InternalServiceError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
    }
)
# AWS did not accept who is calling (the keys, their token or their signature) or what they may do.
CREDENTIALS_CODES = frozenset(
    {
        "AuthFailure",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
    }
)
CREDENTIALS_SETTING = "STACKFLOW_AWS_PROFILE or the AWS_* variables"
# When one update meets several refusals, the first kind here decides.
_AWS_PRECEDENCE = ("aws-credentials", "aws-refused", "aws-unavailable", "aws-throttled")


def aws_errors(text: str) -> list[AwsError]:
    """Every distinct AWS refusal in `text` (pulumi-aws's shape; no HTTP answer: none), in order."""
    found: dict[AwsError, None] = {}
    for match in _AWS_ERROR.finditer(text):
        error = AwsError(
            service=match["service"].strip(),
            operation=match["operation"],
            status=int(match["status"]),
            request_id=match["request_id"].strip(),
            code=match["code"],
            message=(match["message"] or "").strip(),
        )
        if error.status or error.code:  # StatusCode 0: nothing answered; the network rules decide
            found.setdefault(error)
    return list(found)


def aws_diagnosis(error: AwsError) -> Diagnosis:
    """Classify one AWS refusal on its code (and HTTP status), never on its message."""
    code, status, call = error.code, error.status, error.call
    said = f"{code or f'HTTP {status}'} on {call}"
    if code in CREDENTIALS_CODES:
        return Diagnosis(
            "aws-credentials",
            False,
            f"AWS refused the credentials or what they may do ({said}); check "
            f"{CREDENTIALS_SETTING}",
        )
    if code in THROTTLING_CODES or status == 429:
        return Diagnosis("aws-throttled", True, f"AWS throttled the requests ({said})")
    if code in TRANSIENT_CODES or 500 <= status <= 599:
        return Diagnosis("aws-unavailable", True, f"AWS failed to serve the request ({said})")
    return Diagnosis("aws-refused", False, f"AWS refused the request ({said})")


def aws_refusal(exc: BaseException, text: str) -> Diagnosis | None:
    diagnoses = [aws_diagnosis(error) for error in aws_errors(text)]
    if not diagnoses:
        return None
    return min(diagnoses, key=lambda d: _AWS_PRECEDENCE.index(d.category))
