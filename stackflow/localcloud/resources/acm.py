"""ACM certificates and their validation of the local cloud's aws provider. A certificate's id is
its ARN, as in pulumi-aws.

moto validates by DNS only and keys with RSA 2048 alone, so those are what is served; it issues a
requested certificate once MOTO_ACM_VALIDATION_WAIT seconds have passed, which the local cloud sets
to 0. `CertificateValidation` is no AWS resource: as pulumi-aws does, it checks that the records
the program names cover every DNS validation record of the certificate, then that the
certificate is issued. moto has no UpdateCertificateOptions: a change of `options` replaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry
from stackflow.localcloud.resources._declared import KEY_VALUE, Answer, Shape, Tagging
from stackflow.localcloud.resources._shared import input_tags, same_members, timestamp
from stackflow.localcloud.resources.route53 import plain_name

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

CERTIFICATE = "aws:acm/certificate:Certificate"
VALIDATION = "aws:acm/certificateValidation:CertificateValidation"
_GONE = ("ResourceNotFoundException",)
SERVED_METHOD = "DNS"
SERVED_KEY = "RSA_2048"
_TAGGING = Tagging(
    "list_tags_for_certificate",
    "add_tags_to_certificate",
    "remove_tags_from_certificate",
    key="CertificateArn",
    by="id",
    field="Tags",
    keys="Tags",
    item=KEY_VALUE,
    key_item="Key",
)


def _refuse_unserved_choices(inputs: Props) -> None:
    for key, served in (("validationMethod", SERVED_METHOD), ("keyAlgorithm", SERVED_KEY)):
        if inputs.get(key) not in (None, "", served):
            raise NotImplementedError(
                f"the local cloud's aws provider serves {CERTIFICATE} with {key} {served} only "
                f"(moto's ACM), not {inputs[key]!r}"
            )


def _create(acm: Any, inputs: Props, ctx: CloudContext) -> str:
    _refuse_unserved_choices(inputs)
    kwargs: dict[str, Any] = {
        "DomainName": str(inputs["domainName"]),
        "ValidationMethod": SERVED_METHOD,
    }
    names = [str(n) for n in inputs.get("subjectAlternativeNames") or []]
    if names:
        kwargs["SubjectAlternativeNames"] = names
    preference = (inputs.get("options") or {}).get("certificateTransparencyLoggingPreference")
    if preference:
        kwargs["Options"] = {"CertificateTransparencyLoggingPreference": str(preference)}
    if input_tags(inputs):
        kwargs["Tags"] = _TAGGING.wire(input_tags(inputs))
    return str(acm.request_certificate(**kwargs)["CertificateArn"])


def _describe(acm: Any, arn: str, state: Props) -> Answer:
    return dict(acm.describe_certificate(CertificateArn=arn)["Certificate"])


def _validation_records(certificate: Answer) -> list[Props]:
    records = []
    for option in certificate.get("DomainValidationOptions") or []:
        record = option.get("ResourceRecord") or {}
        if record:
            records.append(
                {
                    "domainName": option["DomainName"],
                    "resourceRecordName": record["Name"],
                    "resourceRecordType": record["Type"],
                    "resourceRecordValue": record["Value"],
                }
            )
    return sorted(records, key=lambda r: str(r["domainName"]))


def _outputs(certificate: Answer, ctx: CloudContext) -> Props:
    return {
        "arn": certificate["CertificateArn"],
        "domainValidationOptions": _validation_records(certificate),
        "status": certificate.get("Status", ""),
        "type": certificate.get("Type", ""),
        "notAfter": timestamp(certificate.get("NotAfter")),
        "notBefore": timestamp(certificate.get("NotBefore")),
        "renewalEligibility": certificate.get("RenewalEligibility", ""),
        "pendingRenewal": False,
        "validationEmails": [],
    }


def _observed(certificate: Answer, state: Props) -> Props:
    domain = str(certificate["DomainName"])
    # As pulumi-aws reads them: the other names, the domain itself left out.
    others = [n for n in certificate.get("SubjectAlternativeNames") or [] if n != domain]
    preference = (certificate.get("Options") or {}).get("CertificateTransparencyLoggingPreference")
    return {
        "domainName": domain,
        "subjectAlternativeNames": same_members(others, state.get("subjectAlternativeNames")),
        "validationMethod": SERVED_METHOD,
        "keyAlgorithm": certificate.get("KeyAlgorithm", SERVED_KEY),
        "options": {"certificateTransparencyLoggingPreference": preference or "ENABLED"},
    }


CERTIFICATE_SHAPE = Shape(
    token=CERTIFICATE,
    service="acm",
    inputs=(
        "domainName",
        "subjectAlternativeNames",
        "validationMethod",
        "keyAlgorithm",
        "options",
        "tags",
    ),
    create=_create,
    describe=_describe,
    gone=_GONE,
    outputs=_outputs,
    observed=_observed,
    delete=lambda acm, arn, state: acm.delete_certificate(CertificateArn=arn),
    tagging=_TAGGING,
    computed=(
        "arn",
        "domainValidationOptions",
        "status",
        "type",
        "notAfter",
        "notBefore",
        "renewalEligibility",
        "pendingRenewal",
        "validationEmails",
        "subjectAlternativeNames",
    ),
)


# --- the validation: no AWS resource, a check and a wait ------------------------------------


def _validate(acm: Any, inputs: Props, ctx: CloudContext) -> str:
    arn = str(inputs["certificateArn"])
    certificate = _describe(acm, arn, inputs)
    given = {plain_name(str(f)) for f in inputs.get("validationRecordFqdns") or []}
    if given:  # as pulumi-aws checks them, before it waits
        for record in _validation_records(certificate):
            name = plain_name(str(record["resourceRecordName"]))
            if name not in given:
                raise ValueError(
                    f"missing {record['domainName']} DNS validation record: {name} (the "
                    "certificate's validation records must all be in validationRecordFqdns)"
                )
    if certificate.get("Status") != "ISSUED":
        raise RuntimeError(
            f"certificate {arn} is {certificate.get('Status')}, not ISSUED; the local cloud "
            "issues a requested certificate at once (MOTO_ACM_VALIDATION_WAIT=0)"
        )
    return timestamp(certificate.get("IssuedAt"))


def _validation_describe(acm: Any, id: str, state: Props) -> Answer | None:
    certificate = _describe(acm, str(state["certificateArn"]), state)
    return certificate if certificate.get("Status") == "ISSUED" else None


VALIDATION_SHAPE = Shape(
    token=VALIDATION,
    service="acm",
    inputs=("certificateArn", "validationRecordFqdns"),
    create=_validate,
    describe=_validation_describe,
    gone=_GONE,
    outputs=lambda certificate, ctx: {},
    delete=lambda acm, id, state: None,  # nothing in AWS to delete
)


def register(aws: Registry) -> None:
    """Add the ACM certificate and certificate validation types."""
    aws.add(
        CERTIFICATE_SHAPE.type(),
        VALIDATION_SHAPE.type(),
    )
