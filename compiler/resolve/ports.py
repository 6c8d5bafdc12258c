"""The ports the head must have free before anything starts."""

from __future__ import annotations

from compiler.plan import HeadPort
from compiler.resolve.context import Deployment
from compiler.spec import Backend


def head_ports(d: Deployment) -> tuple[HeadPort, ...]:
    ports = [HeadPort(d.api_port or 0, "API")]
    if d.backend is Backend.RAY:
        ports.append(HeadPort(d.spec.launch.ray_port, "Ray"))
    elif d.multi:
        ports.append(HeadPort(d.spec.launch.master_port, "rendezvous"))
    return tuple(ports)
