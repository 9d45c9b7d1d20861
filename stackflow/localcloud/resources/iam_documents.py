"""`aws.iam.getPolicyDocument`, computed here as pulumi-aws computes it (locally, no AWS call):
the statements as IAM's JSON, indented by two spaces, lists of one as a plain string, action,
resource and principal lists sorted in reverse (as the provider's set-to-list conversion leaves
them), and the id a CRC-32 of the JSON text."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stackflow.localcloud.registry import Props, Registry

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

GET_POLICY_DOCUMENT = "aws:iam/getPolicyDocument:getPolicyDocument"
DEFAULT_VERSION = "2012-10-17"


def _one_or_many(values: Sequence[Any]) -> Any:
    ordered = sorted((str(v) for v in values), reverse=True)
    return ordered[0] if len(ordered) == 1 else ordered


def _principals(given: Sequence[Mapping[str, Any]]) -> Any:
    by_type: dict[str, list[str]] = {}
    for principal in given:
        by_type.setdefault(str(principal["type"]), []).extend(
            str(i) for i in principal.get("identifiers") or []
        )
    if list(by_type) == ["*"]:
        return "*"
    return {kind: _one_or_many(ids) for kind, ids in by_type.items()}


def _conditions(given: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for condition in given:
        values = [str(v) for v in condition.get("values") or []]
        test = out.setdefault(str(condition["test"]), {})
        test[str(condition["variable"])] = values[0] if len(values) == 1 else values
    return out


def _statement(given: Mapping[str, Any]) -> dict[str, Any]:
    statement: dict[str, Any] = {}
    if given.get("sid"):
        statement["Sid"] = str(given["sid"])
    statement["Effect"] = str(given.get("effect") or "Allow")
    for key, field in (
        ("actions", "Action"),
        ("notActions", "NotAction"),
        ("resources", "Resource"),
        ("notResources", "NotResource"),
    ):
        if given.get(key):
            statement[field] = _one_or_many(given[key])
    if given.get("principals"):
        statement["Principal"] = _principals(given["principals"])
    if given.get("notPrincipals"):
        statement["NotPrincipal"] = _principals(given["notPrincipals"])
    if given.get("conditions"):
        statement["Condition"] = _conditions(given["conditions"])
    return statement


def _merged(args: Props) -> list[dict[str, Any]]:
    """Source documents' statements, then the program's, then the override documents' (a
    statement with the same Sid replaces the earlier one), as pulumi-aws merges them."""
    statements: list[dict[str, Any]] = []

    def add(statement: dict[str, Any]) -> None:
        sid = statement.get("Sid")
        for index, held in enumerate(statements):
            if sid and held.get("Sid") == sid:
                statements[index] = statement
                return
        statements.append(statement)

    for text in args.get("sourcePolicyDocuments") or []:
        for statement in json.loads(text).get("Statement", []):
            add(statement)
    for given in args.get("statements") or []:
        add(_statement(given))
    for text in args.get("overridePolicyDocuments") or []:
        for statement in json.loads(text).get("Statement", []):
            add(statement)
    return statements


def _go_json(value: Any, indent: int | None) -> str:
    """JSON as Go's encoder writes it (HTML characters escaped), as the provider does."""
    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def get_policy_document(ctx: CloudContext, args: Props) -> Props:
    """aws:iam/getPolicyDocument: the IAM policy document of the arguments, in pulumi-aws's
    result shape (`json`, `minifiedJson`, `id`)."""
    document: dict[str, Any] = {"Version": str(args.get("version") or DEFAULT_VERSION)}
    if args.get("policyId"):
        document["Id"] = str(args["policyId"])
    document["Statement"] = _merged(args)
    text = _go_json(document, 2)
    return {
        **{k: v for k, v in args.items() if v is not None},
        "version": document["Version"],
        "json": text,
        "minifiedJson": _go_json(document, None),
        "id": str(zlib.crc32(text.encode())),
    }


def register(aws: Registry) -> None:
    """Add getPolicyDocument."""
    aws.function(GET_POLICY_DOCUMENT)(get_policy_document)
