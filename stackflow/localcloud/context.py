"""What a resource entry gets to talk to the local cloud: boto3 clients and the server's control API.

The clients point at moto's server on loopback, with fixed test credentials (never the user's own)
and botocore's retries off: retrying is the engine's and the flow's decision, not the plugin's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stackflow.localcloud.control import ControlClient

LOCAL_ACCESS_KEY = "testing"  # moto accepts any credentials; these are never real ones
LOCAL_SECRET_KEY = "testing"


@dataclass
class CloudContext:
    """One plugin process's view of the local cloud.

    Attributes:
        endpoint: the cloud server's URL, e.g. http://127.0.0.1:4566.
        region: the AWS region the provider is configured for.
        assume_roles: the provider's `assumeRoles` (roleArn, sessionName, externalId), assumed
            in turn with STS before the first call, as pulumi-aws does; every call then runs as
            the last role.
    """

    endpoint: str
    region: str
    assume_roles: tuple[Mapping[str, Any], ...] = ()
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _account_id: str | None = None
    _session: Any = field(default=None, repr=False)
    _control: ControlClient | None = field(default=None, repr=False)
    _credentials: dict[str, str] | None = field(default=None, repr=False)
    on_call: Callable[[str], None] | None = field(default=None, repr=False)
    """Told the AWS service id (EC2, RDS, ...) before each call: errors name the service."""

    def client(self, service: str) -> Any:
        """A boto3 client for `service` (ec2, rds, ecs, elbv2, iam, logs, secretsmanager, sts)."""
        with self._lock:
            found = self._clients.get(service)
            if found is None:
                import boto3
                from botocore.config import Config

                if self._session is None:  # one session: each new one costs ~0.3 s of loading
                    self._session = boto3.session.Session()
                config = Config(
                    retries={"total_max_attempts": 1, "mode": "standard"},
                    connect_timeout=10,
                    read_timeout=300,
                )
                if self._credentials is None:
                    self._credentials = self._assumed(config)
                found = self._session.client(
                    service,
                    region_name=self.region,
                    endpoint_url=self.endpoint,
                    config=config,
                    **self._credentials,
                )
                found.meta.events.register("before-call", self._before_call)
                self._clients[service] = found
            return found

    def _assumed(self, config: Any) -> dict[str, str]:
        """The credentials every client uses: the local ones, or those of the last role in
        `assume_roles`, each assumed with the one before."""
        credentials = {
            "aws_access_key_id": LOCAL_ACCESS_KEY,
            "aws_secret_access_key": LOCAL_SECRET_KEY,
        }
        for role in self.assume_roles:
            sts = self._session.client(
                "sts",
                region_name=self.region,
                endpoint_url=self.endpoint,
                config=config,
                **credentials,
            )
            kwargs: dict[str, Any] = {
                "RoleArn": str(role["roleArn"]),
                "RoleSessionName": str(role.get("sessionName") or "pulumi"),
            }
            if role.get("externalId"):
                kwargs["ExternalId"] = str(role["externalId"])
            if role.get("durationSeconds"):
                kwargs["DurationSeconds"] = int(role["durationSeconds"])
            given = sts.assume_role(**kwargs)["Credentials"]
            credentials = {
                "aws_access_key_id": given["AccessKeyId"],
                "aws_secret_access_key": given["SecretAccessKey"],
                "aws_session_token": given["SessionToken"],
            }
        return credentials

    def _before_call(self, model: Any = None, **_: Any) -> None:
        if self.on_call is not None and model is not None:
            self.on_call(str(model.service_model.service_id))

    @property
    def account_id(self) -> str:
        if self._account_id is None:
            self._account_id = str(self.client("sts").get_caller_identity()["Account"])
        return self._account_id

    @property
    def control_api(self) -> ControlClient:
        """The cloud server's control API (`/_stackflow/*`)."""
        if self._control is None:
            self._control = ControlClient(self.endpoint)
        return self._control

    def control(self, path: str, payload: Any = None, *, timeout: float = 60.0) -> Any:
        """Call the cloud server's own API (`/_stackflow/<path>`): GET without payload, else POST.

        Raises:
            ControlApiError: refused, no answer, or not stackflow's cloud server.
        """
        return self.control_api.call(path, payload, timeout_s=timeout)

    def dataplane(self) -> dict[str, Any]:
        """Where the data plane serves each database and load balancer (see `dataplane/`).

        Raises:
            ControlApiError: as `control`; a bare moto server has no data plane.
        """
        return self.control_api.dataplane()
