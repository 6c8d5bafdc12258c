"""The gateway folder of deployments compiled together: LiteLLM's config, the scripts that start and stop its
container on the head, its PLAN.md and manifest.json. Keys appear only by the name of the variable holding them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from compiler.output.out_records import GATEWAY_CONFIG as CONFIG
from compiler.output.out_records import GATEWAY_SCRIPTS as SCRIPTS
from compiler.output.out_records import MANIFEST
from compiler.output.plan_page import PAGE, code
from compiler.output.render import environment
from compiler.plan import GatewayPlan

CONFIG_IN_CONTAINER = "/etc/sparkc-gateway/config.yaml"
# LiteLLM's OpenAI client refuses to send a request without a key: a deployment that takes none is sent this
# word, which its engine ignores (it is no secret).
NO_KEY = "no-key"
# LiteLLM's answer to a `model` that no deployment serves (1.89: HTTP 400), quoted in PLAN.md and the docs.
UNKNOWN_MODEL = "Invalid model name passed in model=NAME"


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar: JSON's string syntax (ASCII, every other character escaped) is one."""
    return json.dumps(value)


def litellm_config(gateway: GatewayPlan) -> str:
    """LiteLLM's proxy config: one model_list entry per routed name, keys as `os.environ/NAME` references."""
    out = [
        f"# LiteLLM proxy config of the gateway, written by sparkc {gateway.sparkc_version}: do not edit; compile the",
        "# deployments again. Keys are read from the container's environment (os.environ/NAME), never written here.",
        "model_list:",
    ]
    for route in gateway.routes:
        key = f"os.environ/{route.api_key_variable}" if route.api_key_variable else NO_KEY
        out += [
            f"  - model_name: {_yaml(route.model_name)}",
            "    litellm_params:",
            f"      model: {_yaml('openai/' + route.model_name)}",
            f"      api_base: {_yaml(route.api_base)}",
            f"      api_key: {_yaml(key)}",
        ]
    if gateway.key_variable:
        out += ["general_settings:", f"  master_key: {_yaml('os.environ/' + gateway.key_variable)}"]
    return "\n".join(out) + "\n"


def render_gateway(gateway: GatewayPlan) -> dict[str, str]:
    """The gateway folder's scripts and config (what the compile shellchecks: the scripts)."""
    env = environment()
    files = {
        name: env.get_template(f"gateway/{name}.j2").render(gateway=gateway, config=CONFIG, mount=CONFIG_IN_CONTAINER)
        for name in SCRIPTS
    }
    files[CONFIG] = litellm_config(gateway)
    return files


def finish_gateway(gateway: GatewayPlan, files: dict[str, str]) -> dict[str, str]:
    """`files` with the gateway's PLAN.md and, last, the manifest of them all."""
    done = {**files, PAGE: gateway_page(gateway)}
    record = {
        "sparkc_version": gateway.sparkc_version,
        "gateway": asdict(gateway),
        "files": {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(done.items())},
    }
    done[MANIFEST] = json.dumps(record, indent=2, sort_keys=True) + "\n"
    return done


def gateway_page(gateway: GatewayPlan) -> str:
    rows = [
        f"| {code(r.model_name)} | {code(r.deployment)} | {code(r.spec_path)} | {code(r.api_base)} | "
        f"{code(r.api_key_variable) if r.api_key_variable else 'none'} |"
        for r in gateway.routes
    ]
    key = (
        f"The gateway requires its own key: `Authorization: Bearer ${gateway.key_variable}`, read from "
        f"{code(gateway.key_variable)} in the environment of `start-gateway.sh` (a deployment behind it requires one)."
        if gateway.key_variable
        else "The gateway requires no key (no deployment behind it requires one)."
    )
    lines = [
        "# Gateway",
        "",
        f"One OpenAI-compatible address for the deployments compiled together ({', '.join(map(code, gateway.specs))}):",
        f"LiteLLM's proxy ({code(gateway.image)}) in container {code(gateway.container_name)} on {code(gateway.node)},",
        "which sends each request to the deployment that serves the `model` it names.",
        "",
        f"Address: {code(gateway.address + '/v1')}",
        "",
        "| model | deployment | spec | sent to | key variable |",
        "|---|---|---|---|---|",
        *rows,
        "",
        key,
        "The deployments' keys are read from the variables named above, in the same environment; "
        f"{code(CONFIG)} holds only their names.",
        f"A `model` that no deployment serves is refused by LiteLLM (HTTP 400, {code(UNKNOWN_MODEL)}).",
        "",
        "## Commands",
        "",
        "Run on the head, after the deployments' `launch-cluster.sh`:",
        "",
        "| command | what it does |",
        "|---|---|",
        "| `start-gateway.sh` | starts the container (replacing an earlier one of this gateway) and waits until "
        "`/health/liveliness` answers (`--timeout`, `--dry-run`) |",
        "| `start-gateway.sh --check` | whether the container runs and answers; exit 1 if not |",
        "| `stop-gateway.sh` | removes the container (`--dry-run`) |",
        "",
    ]
    return "\n".join(lines)
