"""SGLang: `python3 -m sglang.launch_server`, multi-node through its own --nnodes group (no Ray)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from compiler.engines import EngineArgv, common_flags, host_port
from compiler.plan import Setting, Words
from compiler.spec import Backend, EngineKind, Node, Source

if TYPE_CHECKING:
    from compiler.resolve.context import Deployment

MANAGED_FLAGS = {
    "--port": "engine.port",
    "--host": "engine.host",
    "--model-path": "model.mount",
    "--model": "model.mount",
    "--tp": "engine.tensor_parallel",
    "--tp-size": "engine.tensor_parallel",
    "--pp-size": "engine.pipeline_parallel",
    "--context-length": "engine.max_model_len",
    "--mem-fraction-static": "engine.gpu_memory_utilization",
    "--served-model-name": "model.name",
    "--trust-remote-code": "engine.trust_remote_code",
    "--reasoning-parser": "engine.reasoning_parser",
    "--nnodes": "cluster.nodes",
    "--node-rank": "cluster.nodes",
    "--dist-init-addr": "cluster.head",
    "--dist-timeout": "launch.timeout",
}

SETTING_FLAGS = {
    "model_path": "--model-path",
    "host": "--host",
    "port": "--port",
    "max_model_len": "--context-length",
    "gpu_memory_utilization": "--mem-fraction-static",
}


class Sglang:
    kind = EngineKind.SGLANG
    name = "SGLang"
    default_port = 30000
    # Variables its Ray executor copies from the head to every worker (by prefix, or the whole name).
    ray_carried_prefixes: tuple[str, ...] = ()
    supports_ray = False
    managed_flags: Mapping[str, str] = MANAGED_FLAGS
    setting_flags: Mapping[str, str] = SETTING_FLAGS

    def default_backend(self, nodes: int) -> Backend:
        return Backend.NATIVE

    def argv(self, d: Deployment, rank: int) -> EngineArgv:
        engine = d.spec.engine
        flags: list[Words] = [
            ("--model-path", d.spec.model.mount),
            ("--served-model-name", d.served_model_name),
            ("--host", d.value("host")),
            ("--port", d.value("port")),
            ("--tp", str(engine.tensor_parallel)),
        ]
        if engine.pipeline_parallel > 1:
            flags.append(("--pp-size", str(engine.pipeline_parallel)))
        flags += [(SETTING_FLAGS[s], d.value(s)) for s in ("max_model_len", "gpu_memory_utilization") if d.value(s)]
        if d.multi:
            flags += [
                ("--nnodes", str(len(d.nodes))),
                ("--node-rank", str(rank)),
                ("--dist-init-addr", host_port(d.head.fabric.ip, d.spec.launch.master_port)),
                ("--dist-timeout", str(d.engine_timeout)),
            ]
        program = (("python3",), ("-m", "sglang.launch_server"))
        return EngineArgv(program, tuple(flags) + common_flags(d))

    def node_env(self, d: Deployment, node: Node) -> tuple[Setting, ...]:
        return (
            Setting(
                "SGLANG_HOST_IP",
                node.fabric.ip,
                Source.DERIVED,
                "this node's fabric IP; SGLang otherwise advertises another NIC",
            ),
        )


SGLANG = Sglang()
