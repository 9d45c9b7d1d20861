"""What the local cloud's provider plugins know per Pulumi type token, declared as data.

One `ResourceType` entry per type: the inputs that force replacement (as AWS decides them; the
pulumi-aws registry page of each resource lists them), auto-naming, the outputs only the cloud
knows (unknown in a preview), and four small functions that call AWS through boto3:

- `create(ctx, inputs) -> (id, computed outputs)`
- `read(ctx, id, state) -> observed attributes, or None when the resource is gone`
- `update(ctx, id, state, inputs, changed) -> computed outputs` (None: every change replaces)
- `delete(ctx, id, state) -> None`

Properties are plain dicts keyed by the wire's camelCase names (`cidrBlock`, `vpcId`). The generic
servicer (`plugin.py`) does the rest: the wire format, diffs, previews, refresh and the knobs.
AWS's refusals are left to propagate as botocore `ClientError`s: the servicer reports them in
pulumi-aws's own shape, never in our words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stackflow.localcloud.context import CloudContext

Props = dict[str, Any]


class _Unknown:
    """A value the engine does not know yet (a preview whose input comes from another resource)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()

Create = Callable[["CloudContext", Props], tuple[str, Props]]
Read = Callable[["CloudContext", str, Props], Props | None]
Update = Callable[["CloudContext", str, Props, Props, frozenset[str]], Props]
Delete = Callable[["CloudContext", str, Props], None]


@dataclass(frozen=True)
class ResourceType:
    """How one Pulumi resource type maps onto AWS API calls.

    Attributes:
        token: the Pulumi type token, e.g. "aws:ec2/vpc:Vpc".
        create, read, update, delete: see the module docstring. `update` None: every change
            of an input replaces the resource.
        force_new: inputs whose change makes AWS replace the resource.
        computed: outputs only the cloud knows; unknown in the preview of a create.
        auto_name: the input that gets a generated `<logical name>-<7 hex>` when not given
            (stable across previews: derived from the engine's random seed); None: no auto-name.
        name_prefix: the input that, when given, replaces the logical name in the auto-name.
        auto_name_max: how long that generated name may be.
        drift_inputs: observed attributes that are inputs too, even when the program did not set
            them (so a tag added in the console shows as drift and the next `up` removes it).
        delete_before_replace: the physical name is fixed, so a replacement deletes first.
        defaults: inputs pulumi-aws fills in when the program leaves them out (its schema's
            defaults, applied in Check), so state, outputs and AWS see the same values.
        auto_name_exact: the auto-name is the logical name itself, no random suffix (an S3
            object's key, as pulumi-aws names it).
        served_inputs: the inputs the entry serves (any other set input is refused by name);
            empty when the entry does not declare them (the docs' table says so).
    """

    token: str
    create: Create
    read: Read
    delete: Delete
    update: Update | None = None
    force_new: frozenset[str] = frozenset()
    computed: tuple[str, ...] = ()
    auto_name: str | None = None
    name_prefix: str | None = None
    auto_name_max: int = 255
    drift_inputs: frozenset[str] = frozenset()
    delete_before_replace: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    auto_name_exact: bool = False
    served_inputs: frozenset[str] = frozenset()


Invoke = Callable[["CloudContext", Props], Props]


@dataclass
class Registry:
    """The resource types and functions one provider plugin serves, by token.

    Attributes:
        loader: registers the service modules that serve a token (None: every module) the first
            time one of their tokens is looked up; None when everything is registered already.
    """

    package: str
    resources: dict[str, ResourceType] = field(default_factory=dict)
    functions: dict[str, Invoke] = field(default_factory=dict)
    loader: Callable[[Registry, str | None], None] | None = None

    def _load(self, token: str | None) -> None:
        if self.loader is not None:
            self.loader(self, token)

    def find(self, token: str) -> ResourceType | None:
        """The resource type of `token`, loading its service module on first use; None if no
        module serves it."""
        if token not in self.resources:
            self._load(token)
        return self.resources.get(token)

    def find_function(self, token: str) -> Invoke | None:
        """The function of `token`, loading its service module on first use; None if unserved."""
        if token not in self.functions:
            self._load(token)
        return self.functions.get(token)

    def everything(self) -> Registry:
        """This registry with every service module loaded (for listing what is served)."""
        self._load(None)
        return self

    def add(self, *types: ResourceType) -> None:
        for rtype in types:
            if not rtype.token.startswith(f"{self.package}:"):
                raise ValueError(f"{rtype.token} does not belong to package {self.package}")
            self.resources[rtype.token] = rtype

    def function(self, token: str) -> Callable[[Invoke], Invoke]:
        def register(fn: Invoke) -> Invoke:
            self.functions[token] = fn
            return fn

        return register

    def resource(self, token: str) -> ResourceType:
        """The resource type of `token`.

        Raises:
            NotImplementedError: no module serves it, naming every served type.
        """
        found = self.find(token)
        if found is None:
            raise NotImplementedError(
                f"the local cloud's {self.package} provider does not serve {token} yet; "
                f"served: {', '.join(sorted(self.everything().resources))}"
            )
        return found


def auto_name(logical: str, seed: bytes, length: int = 7, max_length: int = 255) -> str:
    """`<logical>-<hex>` as pulumi-aws auto-names: the suffix comes from the engine's random seed,
    so the same resource gets the same name in every preview and in the update that follows."""
    suffix = hashlib.sha256(seed + logical.encode()).hexdigest()[:length]
    return f"{logical[: max_length - length - 1]}-{suffix}"


def tags_of(items: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    """AWS's [{"Key": k, "Value": v}] (any capitalisation) as {k: v}."""
    out: dict[str, str] = {}
    for item in items or []:
        key = item.get("Key", item.get("key"))
        if key is not None:
            out[str(key)] = str(item.get("Value", item.get("value", "")))
    return out


def tag_list(tags: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """{k: v} as AWS's [{"Key": k, "Value": v}]."""
    return [{"Key": str(k), "Value": str(v)} for k, v in (tags or {}).items()]
