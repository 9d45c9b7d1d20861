"""What the data plane is told: one successful mutating AWS request, as the cloud server saw it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

RDS = "rds"
ELBV2 = "elasticloadbalancing"
_TRUE = "true"


@dataclass(frozen=True)
class ApiCall:
    """One successful mutating AWS request, as the cloud server saw it.

    Attributes:
        service: the endpoint prefix: "rds", "elasticloadbalancing" (ELBv2), "ecs", ...
        action: the API action, e.g. "CreateDBInstance".
        params: the request's parameters (query-protocol form fields, or the JSON body); secrets
            included, so never log or store them.
        response: the response body (empty when the data plane is asked before the cloud acts).
    """

    service: str
    action: str
    params: dict[str, Any]
    response: bytes

    def __repr__(self) -> str:
        return f"ApiCall({self.service}:{self.action})"  # params may hold a password

    def param(self, name: str) -> str | None:
        """A parameter as text (a form field's first value), or None when absent."""
        value = self.params.get(name)
        if isinstance(value, list):
            value = value[0] if value else None
        return None if value is None else str(value)

    def flag(self, name: str) -> bool:
        """A boolean parameter: "true" (any case) or True; absent is False."""
        return (self.param(name) or "").lower() == _TRUE

    def response_field(self, name: str) -> str | None:
        """The first element called `name` in an XML response body (namespaces ignored)."""
        try:
            root = ET.fromstring(self.response)
        except ET.ParseError:
            return None
        for element in root.iter():
            if element.tag.rsplit("}", 1)[-1] == name and element.text:
                return element.text.strip()
        return None
