"""Pulumi Cloud (https://api.pulumi.com, or a self-hosted Pulumi Cloud): the state behind its API,
read by the CLI alone; it ends stale updates itself. No records of stackflow's live beside it:
they stay in the state folder unless records_url names a store."""

from __future__ import annotations

from urllib.parse import urlsplit

from stackflow.backends.base import Backend, BackendURLError, mask_url


class PulumiCloudBackend(Backend):
    name = "Pulumi Cloud"
    schemes = ("https",)
    form = "https://api.pulumi.com"
    self_managed = False
    needs_access_token = True

    def check(self, url: str) -> None:
        super().check(url)
        parts = urlsplit(url)
        if not parts.hostname:
            raise BackendURLError(f"backend URL {mask_url(url)} names no host; use {self.form}")
        if parts.username or parts.password:
            raise BackendURLError(
                f"backend URL {mask_url(url)}: Pulumi Cloud takes its token from "
                "STACKFLOW_PULUMI_ACCESS_TOKEN, never from the URL"
            )

    def restore(self, url: str) -> str:
        return "Pulumi Cloud keeps every update: `pulumi stack import` one from the stack's history"


BACKEND = PulumiCloudBackend()
