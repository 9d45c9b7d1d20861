"""The local cloud's `random` provider: RandomPassword and RandomString, generated as
pulumi-random 4 does (the same inputs and characters; a string's result is its id, a password's
a secret).

There is no cloud behind it: the value is made here with `secrets` (a CSPRNG), kept only in
the (encrypted) state, and never logged. `bcryptHash` is left out: the `bcrypt` package is not a
dependency of this project, and a value that is not a real bcrypt hash would mislead.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from stackflow.localcloud.errors import RandomInputError
from stackflow.localcloud.registry import Props, Registry, ResourceType

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
RANDOM_STRING = "random:index/randomString:RandomString"
RESOURCE_ID = "none"  # pulumi-random's id for every RandomPassword

NUMERIC = "0123456789"
LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SPECIAL = "!@#$%&*()-_=+[]{}<>:?"  # pulumi-random's specials unless overrideSpecial is given

_INPUTS = (
    "length",
    "special",
    "upper",
    "lower",
    "numeric",
    "number",
    "minUpper",
    "minLower",
    "minNumeric",
    "minSpecial",
    "overrideSpecial",
    "keepers",
)


def generate_password(inputs: Props, token: str = RANDOM_PASSWORD) -> str:
    """A password as pulumi-random's RandomPassword (or RandomString, `token`) makes it from
    `inputs`: first the minimum
    count of each class (upper, lower, numeric, special, whether or not the class is enabled),
    then the rest from every enabled class, shuffled.

    Raises:
        RandomInputError: `length` is below 1 or below the sum of the minimums, or no class is
            enabled for characters that remain to be drawn.
    """
    unknown = sorted(k for k in inputs if k not in _INPUTS and not k.startswith("__"))
    if unknown:
        raise RandomInputError(
            f"{token} takes no input(s) {', '.join(unknown)}; it takes: {', '.join(_INPUTS)}"
        )
    length = int(inputs.get("length", 0))
    numeric = bool(inputs.get("numeric", inputs.get("number", True)))
    if inputs.get("number") is False:
        numeric = False  # the deprecated `number` still switches digits off
    specials = str(inputs.get("overrideSpecial") or SPECIAL)
    minimums = {
        UPPER: int(inputs.get("minUpper", 0)),
        LOWER: int(inputs.get("minLower", 0)),
        NUMERIC: int(inputs.get("minNumeric", 0)),
        specials: int(inputs.get("minSpecial", 0)),
    }
    if length < 1 or length < sum(minimums.values()):
        raise RandomInputError(
            f"{token} length {length} must be at least 1 and at least "
            f"minUpper + minLower + minNumeric + minSpecial ({sum(minimums.values())})"
        )
    pool = "".join(
        chars
        for chars, enabled in (
            (UPPER, bool(inputs.get("upper", True))),
            (LOWER, bool(inputs.get("lower", True))),
            (NUMERIC, numeric),
            (specials, bool(inputs.get("special", True))),
        )
        if enabled
    )
    chosen = [secrets.choice(chars) for chars, count in minimums.items() for _ in range(count)]
    remaining = length - len(chosen)
    if remaining and not pool:
        raise RandomInputError(
            f"{token} has every character class (upper, lower, numeric, special) "
            f"switched off; enable one for the {remaining} character(s) left to draw"
        )
    chosen += [secrets.choice(pool) for _ in range(remaining)]
    secrets.SystemRandom().shuffle(chosen)
    return "".join(chosen)


def _create(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    return RESOURCE_ID, {"result": generate_password(inputs)}


def _create_string(ctx: CloudContext, inputs: Props) -> tuple[str, Props]:
    result = generate_password(inputs, RANDOM_STRING)
    return result, {"result": result}


def _read(ctx: CloudContext, id: str, state: Props) -> Props | None:
    return {}  # nothing outside the state to observe


def _delete(ctx: CloudContext, id: str, state: Props) -> None:
    return None  # nothing outside the state to remove


def register(random: Registry) -> None:
    """Add RandomPassword and RandomString to the local cloud's `random` provider."""
    random.add(
        *(
            ResourceType(
                token=token,
                create=create,
                read=_read,
                delete=_delete,
                # pulumi-random makes a new value whenever any input, `keepers` included, changes.
                force_new=frozenset(_INPUTS),
                computed=("result",),
            )
            for token, create in ((RANDOM_PASSWORD, _create), (RANDOM_STRING, _create_string))
        )
    )
