"""The served-types page of the docs (docs/reference/local-cloud-types.md), made from the
registry: per type, what the local cloud serves and what it refuses. `scripts/served_types.py
--write` writes it; a unit test fails while the committed page differs."""

from __future__ import annotations

from stackflow.localcloud.registry import Registry, ResourceType
from stackflow.localcloud.resources import SERVICES, register_module

PAGE = "docs/reference/local-cloud-types.md"
_HEAD = """# What the local cloud serves

Generated from the local cloud's registry by `scripts/served_types.py --write`; a test fails
while this page differs from the registry. A rehearsal (`python flows/run.py rehearse PATH`) on
the local cloud serves these resource types and functions through moto on loopback; any other
type or function is named in one survey preview before anything is created, and an input a type
does not serve is refused by name (never silently ignored). Refusals come back in AWS's own
words. The local cloud serves the provider's region only.

Not served: AppSync data sources and resolvers (moto 5.2.5 has no CreateDataSource or
CreateResolver call, so the API and its keys are served, not what resolves its fields), and every
provider other than `aws` and `random` (a program that needs one is refused, naming it). Where
moto differs from AWS the module says so: an ACM certificate is issued at once (DNS validation,
RSA 2048 only), a CloudFront distribution's default-certificate flag is not read back.
Functions pulumi-aws computes without AWS (getPolicyDocument, getPartition, getArn) are computed
here the same way. Which published programs run is in
[published-programs.md](published-programs.md).
"""


def _row(module: str, rtype: ResourceType) -> str:
    update = "in place" if rtype.update is not None else "replaces"
    replaces = ", ".join(f"`{k}`" for k in sorted(rtype.force_new - {"region"})) or "-"
    if rtype.served_inputs:
        served = ", ".join(f"`{k}`" for k in sorted(rtype.served_inputs))
    else:
        served = f"as `{module}.py` says"
    return f"| `{rtype.token}` | {module} | {served} | {update} | {replaces} |"


def page() -> str:
    """The whole page, as Markdown."""
    lines = [_HEAD, "## Resource types", ""]
    lines += [
        "| type | module | inputs served | a change of another input | replaces on |",
        "|---|---|---|---|---|",
    ]
    functions: list[str] = []
    for package, modules in SERVICES.items():
        for module in modules:
            found = Registry(package)
            register_module(found, module)
            lines += [_row(module, found.resources[t]) for t in sorted(found.resources)]
            functions += [f"| `{token}` | {module} |" for token in sorted(found.functions)]
    lines += ["", "## Functions", "", "| function | module |", "|---|---|", *functions]
    return "\n".join(lines) + "\n"
