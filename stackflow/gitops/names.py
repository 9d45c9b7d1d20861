"""Review environments: which branches get one, and the environment name each branch maps to.

    pr/123, pull/123, pr-123, mr/7 ...     pr-<n>     (a branch whose last part is a number)
    review/Fix login page!                 eph-fix-login-page
    feature/a-very-long-branch-name-here   eph-a-very-lo-3f2a (cut, with a hash of the branch)

Names are ephemeral names (pr-<n>, eph-<name>) of at most 20 characters, so they take the
ephemeral template and the hourly cleanup's TTL. Two branches that map to one name are refused,
both named: neither is deployed, so a name never moves between branches.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable, Mapping

from stackflow.config.kinds import ENVIRONMENT_NAME_MAX, validate_environment_name

_NUMBER = re.compile(r"^(?:.*[/-])?(\d{1,15})$")
_EPH = "eph-"


def matching(branches: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """The branches at least one pattern matches (fnmatch; `*` also crosses `/`), sorted."""
    chosen = list(patterns)
    return sorted(b for b in branches if any(fnmatch.fnmatchcase(b, p) for p in chosen))


def review_name(branch: str) -> str:
    """The environment a review branch deploys to (see the module)."""
    number = _NUMBER.match(branch)
    if number and len(f"pr-{int(number.group(1))}") <= ENVIRONMENT_NAME_MAX:
        return validate_environment_name(f"pr-{int(number.group(1))}")
    tail = branch.split("/", 1)[1] if "/" in branch else branch
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", tail.lower())).strip("-") or "branch"
    room = ENVIRONMENT_NAME_MAX - len(_EPH)
    if len(slug) > room:
        digest = hashlib.sha256(branch.encode()).hexdigest()[:4]
        slug = slug[: room - len(digest) - 1].rstrip("-") + "-" + digest
    return validate_environment_name(_EPH + slug)


class ReviewNameCollision(ValueError):
    """Two branches map to one review environment name."""


def review_environments(branches: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """{environment: branch} for the given review branches, and one message per name two or more
    branches map to (those branches get no environment)."""
    by_name: dict[str, list[str]] = {}
    for branch in sorted(branches):
        by_name.setdefault(review_name(branch), []).append(branch)
    chosen = {name: found[0] for name, found in by_name.items() if len(found) == 1}
    clashes = [
        f"branches {', '.join(repr(b) for b in found)} all map to review environment {name!r}: "
        "none of them is deployed; rename all but one branch"
        for name, found in sorted(by_name.items())
        if len(found) > 1
    ]
    return chosen, clashes
