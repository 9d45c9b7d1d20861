"""The data plane's load balancers: each gets a loopback address, and each listener binds a stand-in
for the app there (`dataplane_app.py`) until `DeleteListener`/`DeleteLoadBalancer`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stackflow.localcloud.context import CloudContext
from stackflow.localcloud.dataplane.addresses import LOAD_BALANCERS, Addresses
from stackflow.localcloud.dataplane.calls import ELBV2, ApiCall
from stackflow.localcloud.dataplane.files import SAFE_NAME, read_json, safe, write_json
from stackflow.localcloud.dataplane_app import AppStandIn
from stackflow.localcloud.errors import DataplaneError


def lb_name_from_arn(arn: str) -> str | None:
    """A load balancer's name from its ARN or one of its listeners' ARNs."""
    # arn:aws:elasticloadbalancing:<region>:<account>:loadbalancer/app/<name>/<id> (listener/...)
    resource = arn.split(":", 5)[-1]
    parts = resource.split("/")
    return parts[2] if len(parts) >= 4 and parts[0] in ("loadbalancer", "listener") else None


class Balancers:
    """The load balancers' addresses and app stand-ins of one data plane (the caller serialises
    the calls).

    Args:
        folder: the data plane's folder (`<root>/dataplane`).
        addresses: its address table.
        endpoint: the cloud server's URL, which the app stand-ins read AWS through.
        region: the region of the local cloud.
        log: receives one-line progress messages.
    """

    def __init__(
        self,
        folder: Path,
        addresses: Addresses,
        endpoint: str,
        region: str,
        log: Callable[[str], None],
    ) -> None:
        self.dir = folder
        self.addresses = addresses
        self.endpoint, self.region = endpoint, region
        self._log = log
        self._stand_ins: dict[str, AppStandIn] = {}  # by listener ARN
        self._cloud: CloudContext | None = None
        self._cloud_lock = (
            threading.Lock()
        )  # not the data plane's: a stand-in never waits for a hook

    def handlers(self) -> dict[tuple[str, str], Callable[[ApiCall], None]]:
        """The ELBv2 actions the load balancers follow."""
        return {
            (ELBV2, "CreateLoadBalancer"): self._create_lb,
            (ELBV2, "CreateListener"): self._create_listener,
            (ELBV2, "ModifyListener"): self._modify_listener,
            (ELBV2, "DeleteListener"): self._delete_listener,
            (ELBV2, "DeleteLoadBalancer"): self._delete_lb,
        }

    def start_all(self) -> list[str]:
        """Bind every recorded listener's stand-in; one message per failure."""
        problems = []
        for lb in self.records():
            for listener_arn, port in lb["listeners"].items():
                try:
                    self._bind(lb, listener_arn, int(port))
                except DataplaneError as exc:
                    problems.append(str(exc))
        return problems

    def stop_all(self) -> None:
        """Stop every stand-in; the records stay."""
        for stand_in in self._stand_ins.values():
            stand_in.stop()
        self._stand_ins.clear()

    def endpoints(self) -> dict[str, Any]:
        """Where each load balancer is served: its host and its listeners' ports."""
        return {
            lb["name"]: {
                "host": lb["host"],
                "ports": sorted({int(p) for p in lb["listeners"].values()}),
            }
            for lb in self.records()
        }

    def _path(self, name: str) -> Path:
        return self.dir / "lb" / f"{name}.json"

    def records(self) -> list[dict[str, Any]]:
        folder = self.dir / "lb"
        paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
        return [d for d in map(read_json, paths) if isinstance(d, dict)]

    def _by_arn(self, arn: str | None) -> dict[str, Any] | None:
        if not arn:
            return None
        found = next((lb for lb in self.records() if lb.get("arn") == arn), None)
        if found is None:
            name = lb_name_from_arn(arn)
            data = read_json(self._path(name)) if name and SAFE_NAME.match(name) else None
            found = data if isinstance(data, dict) else None
        return found

    def _by_listener(self, listener_arn: str | None) -> dict[str, Any] | None:
        return next(
            (lb for lb in self.records() if listener_arn in lb["listeners"]),
            None,
        )

    def _new(self, name: str, arn: str | None) -> dict[str, Any]:
        lb: dict[str, Any] = {
            "name": name,
            "arn": arn,
            "host": self.addresses.of(LOAD_BALANCERS, name),
            "listeners": {},
        }
        write_json(self._path(name), lb)
        self._log(f"local-cloud load balancer {name} has address {lb['host']}")
        return lb

    def _create_lb(self, call: ApiCall) -> None:
        name = safe("load balancer name", call.param("Name"))
        existing = read_json(self._path(name))
        arn = call.response_field("LoadBalancerArn")
        if isinstance(existing, dict):
            existing["arn"] = arn or existing.get("arn")
            write_json(self._path(name), existing)
        else:
            self._new(name, arn)

    def _create_listener(self, call: ApiCall) -> None:
        lb_arn = call.param("LoadBalancerArn")
        port = int(call.param("Port") or 80)
        listener_arn = call.response_field("ListenerArn") or f"{lb_arn}#port-{port}"
        lb = self._by_arn(lb_arn)
        if lb is None:  # created before the data plane was listening: learn it from its ARN
            lb = self._new(safe("load balancer name", lb_name_from_arn(lb_arn or "")), lb_arn)
        lb["arn"] = lb.get("arn") or lb_arn
        lb["listeners"][listener_arn] = port
        write_json(self._path(lb["name"]), lb)
        self._bind(lb, listener_arn, port)

    def _modify_listener(self, call: ApiCall) -> None:
        listener_arn = call.param("ListenerArn")
        new_port = call.param("Port")
        lb = self._by_listener(listener_arn)
        if lb is None or listener_arn is None or not new_port:
            return
        if int(lb["listeners"][listener_arn]) != int(new_port):
            self._unbind(listener_arn)
            lb["listeners"][listener_arn] = int(new_port)
            write_json(self._path(lb["name"]), lb)
            self._bind(lb, listener_arn, int(new_port))

    def _delete_listener(self, call: ApiCall) -> None:
        listener_arn = call.param("ListenerArn")
        lb = self._by_listener(listener_arn)
        if lb is None or listener_arn is None:
            return
        self._unbind(listener_arn)
        del lb["listeners"][listener_arn]
        write_json(self._path(lb["name"]), lb)

    def _delete_lb(self, call: ApiCall) -> None:
        lb = self._by_arn(call.param("LoadBalancerArn"))
        if lb is None:
            return
        for listener_arn in lb["listeners"]:  # AWS deletes the listeners with it
            self._unbind(listener_arn)
        self._path(lb["name"]).unlink(missing_ok=True)
        self.addresses.release(LOAD_BALANCERS, lb["name"])
        self._log(f"local-cloud load balancer {lb['name']} deleted; {lb['host']} released")

    def _cloud_context(self) -> CloudContext:
        # Created on a stand-in's first request, never inside on_api_call.
        with self._cloud_lock:
            if self._cloud is None:
                self._cloud = CloudContext(self.endpoint, self.region)
            return self._cloud

    def _bind(self, lb: dict[str, Any], listener_arn: str, port: int) -> None:
        current = self._stand_ins.get(listener_arn)
        if current is not None and current.running and current.port == port:
            return
        stand_in = AppStandIn(lb["host"], port, lb["arn"], self._cloud_context, self._log)
        try:
            stand_in.start()
        except OSError as exc:
            raise DataplaneError(
                f"load balancer {lb['name']}: cannot listen on {lb['host']}:{port} ({exc}); "
                "free that port (ports below 1024 need root)"
            ) from None
        self._stand_ins[listener_arn] = stand_in
        self._log(f"local-cloud load balancer {lb['name']} serves the app on {lb['host']}:{port}")

    def _unbind(self, listener_arn: str) -> None:
        stand_in = self._stand_ins.pop(listener_arn, None)
        if stand_in is not None:
            stand_in.stop()
