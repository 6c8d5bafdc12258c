"""The systemd unit for the head: after a reboot it runs launch-cluster.sh once, retrying a failed
launch a bounded number of times, and stop-cluster.sh when stopped."""

from __future__ import annotations

from compiler.plan import ServicePlan
from compiler.resolve.context import Deployment

# install-service.sh links the build folder here, so the unit names a fixed absolute path wherever the
# folder was copied to on the head.
LINK_ROOT = "/etc/sparkc/deployments"
# Preflight, cleanup, the fabric probe and saving every node's logs on a failure, beyond the launch's
# own budget: systemd must never kill a launch that is still within it.
START_SLACK = 300
STOP_TIMEOUT = 300
RESTART_SEC = 60
START_LIMIT_BURST = 3


def service_plan(d: Deployment) -> ServicePlan:
    start_timeout = d.spec.launch.timeout + START_SLACK
    return ServicePlan(
        unit=f"sparkc-{d.spec.name}.service",
        watch_unit=f"sparkc-{d.spec.name}-watch.service",
        folder=f"{LINK_ROOT}/{d.spec.name}",
        start_timeout=start_timeout,
        stop_timeout=STOP_TIMEOUT,
        restart_sec=RESTART_SEC,
        start_limit_burst=START_LIMIT_BURST,
        # long enough to hold every start of one burst, each taking the whole budget: a bounded rate
        start_limit_interval=START_LIMIT_BURST * (start_timeout + RESTART_SEC),
    )
