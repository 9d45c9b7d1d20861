"""Pulumi policy packs (CrossGuard, the `pulumi-policy` package) on every preview and `up`.

packs       the packs an environment names, read once: their files, digest and config
venv        each pack's virtualenv (pulumi-policy needs protobuf 5, this project locks 6)
staged      the copy of a pack the CLI runs, pointing at its virtualenv; its rules' names
analyzer    `pulumi-analyzer-policy-python`, the plugin through which the CLI starts a pack
violation   what a pack reported, as the plan, the summary and the refusal show it

The engine passes the staged packs to `pulumi preview/up --policy-pack`; the CLI built here has
no Python language host, so it starts a pack through the analyzer plugin, which runs the pack's
own `__main__.py` with pulumi-policy in the pack's virtualenv: a team's existing pack runs
unchanged.
"""

from __future__ import annotations
