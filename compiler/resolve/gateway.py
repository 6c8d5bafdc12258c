"""The gateway of deployments compiled together: one LiteLLM proxy that routes each request by its `model` to the
deployment that serves that name. What it must not share with them (its port on its node, a model name served
twice) is reported against the spec that has it, naming the other deployment and its spec file."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.diagnostics import Diagnostic, Path, error, warning
from compiler.plan import GatewayPlan, GatewayRoute, HeadPort, Plan
from compiler.resolve.together import PORT_FIELD

# LiteLLM's proxy, pinned: the release's image for real clusters (releases from 1.84 on are tagged vX.Y.Z), and
# the same release from PyPI for the simulated cluster (simcluster/install.sh).
LITELLM_VERSION = "1.89.4"
LITELLM_IMAGE = f"ghcr.io/berriai/litellm:v{LITELLM_VERSION}"
DEFAULT_PORT = 4000  # LiteLLM's own default
FOLDER = "gateway"  # OUT/gateway/, beside the deployments' OUT/NAME/
KEY_VARIABLE = "SPARKC_GATEWAY_KEY"  # the gateway's own key, where a deployment behind it requires one


def plan_gateway(
    plans: Sequence[Plan],
    port: int | None = None,
    image: str = LITELLM_IMAGE,
    mounts: tuple[tuple[str, str], ...] = (),
) -> tuple[GatewayPlan | None, list[list[Diagnostic]]]:
    """The gateway of `plans` (in the order given), and the problems of each plan beside it.

    With `port` given (--gateway-port) the gateway was asked for: what stands in its way is an error. Without,
    it takes the first port from LiteLLM's 4000 up that no deployment uses on that head, and what stands in its
    way only leaves it out, with a warning: deployments that compiled together before compile as they did."""
    first = plans[0]
    node = first.head
    asked = port is not None
    port = port if port is not None else _free_port(plans, node)
    problem = error if asked else warning
    found: list[list[Diagnostic]] = [[] for _ in plans]
    routes: list[GatewayRoute] = []
    served: dict[str, int] = {}
    for i, plan in enumerate(plans):
        if plan.name == FOLDER:
            found[i].append(
                problem(
                    ("name",),
                    f"deployment {plan.name!r} is written to {FOLDER}/, where the gateway of these deployments goes"
                    f"{'' if asked else ', so no gateway is written'}: give it another name for one "
                    "(or compile with --no-gateway)",
                )
            )
        _port(plans, i, node, port, found)
        # The gateway runs on the first deployment's head: a deployment there is reached as its own launcher
        # reaches it, one elsewhere at the address it tells the operator.
        host = plan.probe_url_host if plan.head == node else plan.endpoint_host
        for name in (plan.served_model_name, *plan.model.aliases):
            other = served.setdefault(name, i)
            if other != i:
                found[i].append(_served_twice(name, plan, plans[other], problem, asked))
                continue
            base = f"http://{host}:{plan.api_port}/v1"
            routes.append(GatewayRoute(name, plan.name, plan.spec_path, base, plan.api_key_variable))
    if any(found_here for found_here in found):
        return None, found
    keyed = any(r.api_key_variable for r in routes)
    gateway = GatewayPlan(
        sparkc_version=first.sparkc_version,
        node=node,
        image=image,
        port=port,
        container_name=f"sparkc-gateway-{port}",
        address=f"http://{first.endpoint_host}:{port}",
        key_variable=KEY_VARIABLE if keyed else "",
        routes=tuple(routes),
        specs=tuple(p.spec_path for p in plans),
        mounts=mounts,
    )
    return gateway, found


def _ports_on(plan: Plan, node: str) -> tuple[HeadPort, ...]:
    here = next((n for n in plan.nodes if n.name == node), None)
    return here.ports if here is not None else ()


def _free_port(plans: Sequence[Plan], node: str) -> int:
    """The first port from LiteLLM's default up that no deployment listens on at the gateway's node."""
    taken = {p.port for plan in plans for p in _ports_on(plan, node)}
    port = DEFAULT_PORT
    while port in taken:
        port += 1
    return port


def _port(plans: Sequence[Plan], i: int, node: str, port: int, found: list[list[Diagnostic]]) -> None:
    for taken in _ports_on(plans[i], node):
        if taken.port == port:
            found[i].append(
                error(
                    tuple(PORT_FIELD.get(taken.what, "engine.backend").split(".")),
                    f"port {port} on {node} is {plans[i].name}'s {taken.what} port and the gateway's port: compile "
                    f"with --gateway-port and another port (or give {plans[i].name} another port)",
                )
            )


def _served_twice(
    name: str, plan: Plan, other: Plan, problem: Callable[[Path, str], Diagnostic], asked: bool
) -> Diagnostic:
    field = ("model", "name") if name == plan.served_model_name else ("model", "aliases")
    return problem(
        field,
        f"model name {name!r} is served by {plan.name} ({plan.spec_path}) and by {other.name} ({other.spec_path})"
        f"{'' if asked else ', so no gateway is written'}: the gateway routes each name to one deployment; for one, "
        "give one of them another model.name or alias (or compile with --no-gateway)",
    )
