"""Names that become folders: a Pulumi project's or stack's name is joined into paths under the
state folder (`workspaces/<cloud>/<project>/<stack>/`) and into the backend's own layout, so a
name is accepted only when it is one plain path part Pulumi also accepts.

    validate_project_name("shop-api")   ok
    validate_stack_name("..")           refused: it would be the folder above
"""

from __future__ import annotations

import re

from stackflow.errors import SettingsError, echo

PULUMI_NAME_MAX = 100  # Pulumi's own limit for project and stack names
_PULUMI_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
ACCEPTED = "letters, digits, '-', '_' and '.', at most 100 characters, not '.' or '..'"


class NameRefused(SettingsError):
    """A project or stack name that is not one plain path part Pulumi accepts."""


def _check(what: str, kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise NameRefused(f"{what} is missing; accepted: {ACCEPTED}")
    if name in (".", ".."):
        raise NameRefused(
            f"{what} {echo(name)}: not a Pulumi {kind} name (it would name a folder above its "
            f"own); accepted: {ACCEPTED}"
        )
    if len(name) > PULUMI_NAME_MAX or not _PULUMI_NAME.match(name):
        raise NameRefused(f"{what} {echo(name)}: not a Pulumi {kind} name; accepted: {ACCEPTED}")
    return name


def validate_project_name(name: object, what: str = "project name") -> str:
    """A Pulumi project name that is safe to join into a path.

    Args:
        name: the name as read (from Pulumi.yaml, an argument, a record).
        what: how the error names where it came from ("Pulumi.yaml: name").

    Raises:
        NameRefused: naming `what`, the value (cut) and what is accepted.
    """
    return _check(what, "project", name)


def validate_stack_name(name: object, what: str = "stack name") -> str:
    """A Pulumi stack name that is safe to join into a path (see `validate_project_name`).

    Raises:
        NameRefused: naming `what`, the value (cut) and what is accepted.
    """
    return _check(what, "stack", name)
