"""Resolve a validated spec (defaults filled in) into a Plan: every node, NCCL, Ray and engine setting.

Pure: no disk, no YAML. Problems are reported against paths into the spec so the CLI can print a
line and column for cross-field rules too.
"""
from __future__ import annotations

import difflib
import ipaddress
import json
import re
from typing import Any

from compiler import __version__
from compiler.diagnostics import Diagnostic, Path, error, warning
from compiler.plan import Effective, NodePlan, Plan, ProfileCheck, Setting
from compiler.profiles import Profile, find_profile, load_profiles

ENGINE_DEFAULT_PORT = {"vllm": 8000, "sglang": 30000}
DEFAULT_ULIMITS = {"memlock": "-1", "stack": "67108864"}
# Ports a Ray head opens besides its GCS port; an API port there would collide.
RAY_WELL_KNOWN_PORTS = {8265: "Ray dashboard", 10001: "Ray client server"}
# Seconds the engine's own timeouts leave to the launcher, so the engine reports its failure first.
ENGINE_TIMEOUT_MARGIN = 60
# Runs the engine inside the Ray head's container (`sh -c WRAPPER sparkc-engine ENGINE...`): output
# to PID 1's stdout/stderr so `docker logs` has it, exit status to a file the launcher polls.
ENGINE_WRAPPER = ('echo "$$" > /tmp/sparkc-engine.pid; rm -f /tmp/sparkc-engine.exit; '
                  '"$@" >> /proc/1/fd/1 2>> /proc/1/fd/2; code=$?; '
                  'echo "sparkc: engine exited with status $code" >> /proc/1/fd/2; '
                  'echo "$code" > /tmp/sparkc-engine.exit')
# Whole `_`-separated words only: HF_TOKEN is a secret, TOKENIZERS_PARALLELISM is not.
SECRET_NAME = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY)(_|$)")

# Engine flags sparkc sets itself, and the spec field that controls each.
MANAGED_FLAGS = {
    "vllm": {
        "--port": "engine.port", "--host": "engine.host", "--model": "model.mount",
        "--tensor-parallel-size": "engine.tensor_parallel", "-tp": "engine.tensor_parallel",
        "--pipeline-parallel-size": "engine.pipeline_parallel", "-pp": "engine.pipeline_parallel",
        "--max-model-len": "engine.max_model_len",
        "--gpu-memory-utilization": "engine.gpu_memory_utilization",
        "--served-model-name": "model.name", "--trust-remote-code": "engine.trust_remote_code",
        "--reasoning-parser": "engine.reasoning_parser",
        "--distributed-executor-backend": "engine.backend", "--nnodes": "cluster.nodes",
        "--node-rank": "cluster.nodes", "--master-addr": "cluster.head",
        "--master-port": "launch.master_port", "--headless": "engine.backend",
    },
    "sglang": {
        "--port": "engine.port", "--host": "engine.host", "--model-path": "model.mount",
        "--model": "model.mount", "--tp": "engine.tensor_parallel", "--tp-size": "engine.tensor_parallel",
        "--pp-size": "engine.pipeline_parallel", "--context-length": "engine.max_model_len",
        "--mem-fraction-static": "engine.gpu_memory_utilization",
        "--served-model-name": "model.name", "--trust-remote-code": "engine.trust_remote_code",
        "--reasoning-parser": "engine.reasoning_parser", "--nnodes": "cluster.nodes",
        "--node-rank": "cluster.nodes", "--dist-init-addr": "cluster.head",
        "--dist-timeout": "launch.timeout",
    },
}

# Variables that carry one node's fabric interface; a cluster-wide override defeats per-node resolution.
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES",
               "OMPI_MCA_btl_tcp_if_include")


def resolve(spec: dict[str, Any], *, given: dict[str, Any], spec_path: str,
            spec_sha256: str) -> tuple[Plan | None, list[Diagnostic]]:
    """`spec` has the schema's defaults filled in; `given` is what the user wrote (for provenance)."""
    resolver = _Resolver(spec, given)
    plan = resolver.run(spec_path, spec_sha256)
    # A rule checked once per node can find the same cluster-wide problem several times.
    return plan, list(dict.fromkeys(resolver.diagnostics))


class _Resolver:
    def __init__(self, spec: dict[str, Any], given: dict[str, Any]) -> None:
        self.spec = spec
        self.given = given
        self.diagnostics: list[Diagnostic] = []

    def err(self, path: Path, message: str) -> None:
        self.diagnostics.append(error(path, message))

    def warn(self, path: Path, message: str) -> None:
        self.diagnostics.append(warning(path, message))

    # -- the whole resolution, in the order a reader would check it ------------------------------

    def run(self, spec_path: str, spec_sha256: str) -> Plan | None:
        spec = self.spec
        self._check_strings(spec, ())
        nodes = spec["cluster"]["nodes"]
        engine = spec["engine"]
        container = spec["container"]
        launch = spec["launch"]
        model = spec["model"]
        kind = engine["kind"]

        head_index = self._head_index(nodes)
        self._check_nodes(nodes, head_index)
        multi = len(nodes) > 1
        backend = engine.get("backend") or ("ray" if kind == "vllm" and multi else "native")
        total_gpus = sum(n["gpus"] for n in nodes)
        self._check_layout(engine, model, total_gpus)

        profile = find_profile(container["image"])
        mode = self._entrypoint_mode(container, profile, kind)
        port = engine.get("port", ENGINE_DEFAULT_PORT[kind])
        mount = model.get("mount", model["path"])
        requested = {
            "model_path": mount,
            "host": engine["host"],
            "port": str(port),
            "max_model_len": str(engine["max_model_len"]) if "max_model_len" in engine else "",
            "gpu_memory_utilization": (str(engine["gpu_memory_utilization"])
                                       if "gpu_memory_utilization" in engine else ""),
        }
        served_requested = model.get("name", mount)
        effective, adapt_env = self._effective(requested, profile, mode, container, engine)
        eff = {e.setting: e.effective for e in effective}
        served = served_requested if "name" in model or eff["model_path"] == mount else eff["model_path"]
        effective.append(Effective("served_model_name", served_requested, served,
                                   "vLLM names the model after its path" if served != served_requested else ""))
        for e in effective:
            if e.differs:
                self.warn(_SETTING_PATHS[e.setting] if e.setting != "model_path" or "mount" not in model
                          else ("model", "mount"),
                          f"the image will use {e.effective or '(its default)'}, not {e.requested or '(unset)'}: "
                          f"{e.reason}")

        api_port = int(eff["port"])
        head_ports = self._check_ports(engine, launch, backend, multi, api_port)
        self._check_args(kind, engine["args"])
        self._check_secrets(container)
        if profile and profile.engine != kind:
            self.warn(("container", "image"), f"image profile '{profile.id}' is a {profile.engine} image, "
                                              f"but engine.kind is {kind}")
        if kind == "sglang" and backend == "ray":
            self.err(("engine", "backend"), "SGLang forms its own multi-node group; use backend: native")
        elif backend == "ray" and profile and profile.ray == "absent":
            self.err(("engine", "backend"), f"{profile.family} ships without Ray; use backend: native")

        engine_timeout = max(launch["timeout"] - ENGINE_TIMEOUT_MARGIN, 30)
        # A silent fallback to sockets only matters, and only shows, between nodes with RDMA devices.
        nccl_check = launch.get("nccl_check", multi and any(n["fabric"]["hcas"] for n in nodes))
        head = nodes[head_index]
        ordered = [head] + [n for i, n in enumerate(nodes) if i != head_index]
        ssh_user = spec["cluster"]["ssh"].get("user")
        node_plans = []
        for rank, node in enumerate(ordered):
            spec_index = nodes.index(node)
            env = self._node_env(node, spec_index, head, rank, kind, backend, multi, engine_timeout, adapt_env,
                                 nccl_check)
            argv = self._engine_argv(kind, backend, mount, served, eff, engine, len(ordered), rank,
                                     head["fabric"]["ip"], launch, engine_timeout)
            node_plans.append((node, rank, env, argv))
        if any(d.severity.value == "error" for d in self.diagnostics):
            return None

        containers = {n["name"]: f"sparkc-{spec['name']}-{n['name']}" for n in nodes}
        labels = (f"sparkc.deployment={spec['name']}", f"sparkc.spec-sha256={spec_sha256}")
        plans: list[NodePlan] = []
        engine_exec: tuple[str, ...] = ()
        for node, rank, env, argv in node_plans:
            if backend == "ray":
                main_cmd = self._ray_start(node, rank, head, launch)
                entry_override, command = main_cmd[0], main_cmd[1:]
                if rank == 0:
                    engine_exec = self._ray_engine_exec(containers[node["name"]], argv, profile, mode)
            else:
                entry_override, command = self._container_command(argv, profile, mode)
            run = self._docker_run(node, containers[node["name"]], labels, container, model, mount, env,
                                   entry_override, command)
            plans.append(NodePlan(
                name=node["name"], role="head" if rank == 0 else "worker", rank=rank,
                ssh_target="" if rank == 0 else (f"{ssh_user}@{node['ssh']}" if ssh_user else node["ssh"]),
                fabric_ip=node["fabric"]["ip"], netdev=node["fabric"]["netdev"],
                hcas=tuple(node["fabric"]["hcas"]), gpus=node["gpus"], container=containers[node["name"]],
                env=env, docker_run=run, nccl_transport=self._nccl_transport(node, rank, backend, nodes),
            ))

        # Waves of containers started together. Ray: the head, then every worker at once. Native
        # multi-node: ranks >= 1 at once (they wait for the master), then rank 0.
        head_wave, worker_wave = (plans[0].name,), tuple(p.name for p in plans[1:])
        waves = (head_wave, worker_wave) if backend == "ray" else (worker_wave, head_wave)
        start_waves = tuple(w for w in waves if w)
        probe_host = eff["host"] if eff["host"] not in ("0.0.0.0", "::", "") else "127.0.0.1"
        quirks = self._quirks(profile, mode, backend)
        settings = self._settings(spec, kind, backend, mode, profile, api_port, total_gpus, launch, engine_timeout,
                                  nccl_check)
        return Plan(
            sparkc_version=__version__, spec_path=spec_path, spec_sha256=spec_sha256, name=spec["name"],
            engine=kind, backend=backend, image=container["image"], profile=profile.id if profile else "",
            entrypoint_mode=mode, head=head["name"], nodes=tuple(plans), start_waves=start_waves,
            engine_exec=engine_exec, api_port=api_port, probe_host=probe_host,
            endpoint_host=head.get("ssh") or head["fabric"]["ip"], served_model_name=served,
            model_host_path=model["path"], ray_port=launch["ray_port"], master_port=launch["master_port"],
            ray_required=backend == "ray" and (profile is None or profile.ray != "present"),
            ray_expected_ips=tuple(p.fabric_ip for p in plans) if backend == "ray" else (),
            total_gpus=total_gpus, nccl_check=nccl_check, head_ports=head_ports, launch_timeout=launch["timeout"],
            engine_timeout=engine_timeout,
            ssh_options=self._ssh_options(spec["cluster"]["ssh"]), secrets=tuple(container["secrets"]),
            effective=tuple(effective), quirks=quirks, settings=settings,
            profile_check=ProfileCheck(
                entrypoint_json=json.dumps(list(profile.entrypoint), separators=(",", ":"))
                if profile and profile.entrypoint is not None else "",
                env_defaults=tuple(f"{c.env}={c.default}" for _, c in profile.controls)
                if profile and mode == "keep" else (),
                fatal=mode in ("keep", "adapt") and profile is not None,
            ),
        )

    # -- checks ------------------------------------------------------------------------------

    def _check_strings(self, value: Any, path: Path) -> None:
        """No control characters anywhere: every value ends up in a script, a label or a log line."""
        if isinstance(value, dict):
            for k, v in value.items():
                self._check_strings(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self._check_strings(v, path + (i,))
        elif isinstance(value, str) and re.search(r"[\x00-\x1f\x7f]", value):
            self.err(path, "control characters (newline, tab, ...) are not allowed in values")

    def _head_index(self, nodes: list[dict[str, Any]]) -> int:
        wanted = self.spec["cluster"].get("head")
        names = [n["name"] for n in nodes]
        if wanted is None:
            return 0
        if wanted in names:
            return names.index(wanted)
        hint = difflib.get_close_matches(wanted, names, n=1)
        self.err(("cluster", "head"), f"no node is named '{wanted}'"
                 + (f"; did you mean '{hint[0]}'?" if hint else f"; nodes: {', '.join(names)}"))
        return 0

    def _check_nodes(self, nodes: list[dict[str, Any]], head_index: int) -> None:
        seen: dict[str, dict[str, int]] = {"name": {}, "ssh": {}, "ip": {}}
        for i, node in enumerate(nodes):
            fabric = node["fabric"]
            for key, value, path in (("name", node["name"], ("cluster", "nodes", i, "name")),
                                     ("ssh", node.get("ssh"), ("cluster", "nodes", i, "ssh")),
                                     ("ip", fabric["ip"], ("cluster", "nodes", i, "fabric", "ip"))):
                if value is None:
                    continue
                if value in seen[key]:
                    self.err(path, f"'{value}' is already used by node {seen[key][value] + 1}; "
                                   f"every node needs its own {'fabric IP' if key == 'ip' else key}")
                seen[key][value] = i
            ip_path = ("cluster", "nodes", i, "fabric", "ip")
            try:
                address = ipaddress.ip_address(fabric["ip"])
            except ValueError:
                self.err(ip_path, f"'{fabric['ip']}' is not an IP address; the fabric side needs the CX-7 "
                                  "port's address (e.g. 192.168.100.10), not a host name")
                address = None
            if address is not None and (address.is_unspecified or address.is_multicast):
                self.err(ip_path, f"{address} cannot be a node's address")
            elif address is not None and address.is_loopback and len(nodes) > 1:
                self.warn(ip_path, f"{address} is a loopback address: only nodes on one machine can reach it")
            if i != head_index and not node.get("ssh"):
                self.err(("cluster", "nodes", i), "a worker needs an 'ssh' address (its management address)")
            hcas = fabric["hcas"]
            if len(hcas) == 1:
                self.warn(("cluster", "nodes", i, "fabric", "hcas"),
                          "only one RDMA device: a CX-7 port shows up as two twins; with one NCCL gets "
                          "about half the bandwidth (list both, e.g. rocep1s0f1 and roceP2p1s0f1)")
            expected = _roce_name(fabric["netdev"])
            if hcas and expected and all(h.lstrip("=").startswith("roce") for h in hcas) and \
                    expected not in [h.lstrip("=").split(":")[0] for h in hcas]:
                self.warn(("cluster", "nodes", i, "fabric", "hcas"),
                          f"netdev {fabric['netdev']} belongs to RDMA device {expected}, which is not listed "
                          "(check with ibdev2netdev)")
        with_hcas = [bool(n["fabric"]["hcas"]) for n in nodes]
        if any(with_hcas) and not all(with_hcas):
            self.warn(("cluster", "nodes"), "some nodes list RDMA devices and some do not: NCCL must use the "
                                            "same transport on every rank, expect a hang or a fallback")

    def _check_layout(self, engine: dict[str, Any], model: dict[str, Any], total_gpus: int) -> None:
        tp, pp = engine["tensor_parallel"], engine["pipeline_parallel"]
        if tp * pp != total_gpus:
            self.err(("engine", "tensor_parallel"),
                     f"tensor_parallel x pipeline_parallel = {tp} x {pp} = {tp * pp}, but the nodes have "
                     f"{total_gpus} GPU{'s' if total_gpus != 1 else ''}; they must be equal")
        arch = model.get("architecture", {})
        for field, what in (("attention_heads", "attention heads"), ("kv_heads", "KV heads"),
                            ("experts", "experts")):
            count = arch.get(field)
            if count is None:
                continue
            ok = count % tp == 0 or (field == "kv_heads" and tp % count == 0)
            if not ok:
                alternative = self._layout_alternative(arch, tp * pp)
                self.err(("engine", "tensor_parallel"),
                         f"tensor_parallel {tp} does not divide the model's {count} {what}"
                         + (f"; try tensor_parallel: {alternative[0]}, pipeline_parallel: {alternative[1]}"
                            if alternative else ""))

    @staticmethod
    def _layout_alternative(arch: dict[str, Any], gpus: int) -> tuple[int, int] | None:
        for tp in range(gpus, 0, -1):
            if gpus % tp:
                continue
            if all(arch.get(f) is None or arch[f] % tp == 0 for f in ("attention_heads", "experts")):
                kv = arch.get("kv_heads")
                if kv is None or kv % tp == 0 or tp % kv == 0:
                    return tp, gpus // tp
        return None

    def _check_ports(self, engine: dict[str, Any], launch: dict[str, Any], backend: str, multi: bool,
                     api_port: int) -> tuple[str, ...]:
        """The ports the head must have free, as "PORT what"; each must be distinct."""
        api_path = ("engine", "port") if "port" in engine else ("engine",)
        used: list[tuple[int, Path, str]] = [(api_port, api_path, "API")]
        if backend == "ray":
            used.append((launch["ray_port"], ("launch", "ray_port"), "Ray"))
        if backend == "native" and multi:
            used.append((launch["master_port"], ("launch", "master_port"), "rendezvous"))
        for i, (port, path, what) in enumerate(used):
            for other_port, other_path, other_what in used[:i]:
                if port == other_port:
                    # Point at the one the user wrote; a default is not where the mistake is.
                    where = path if self._given_path(path) or not self._given_path(other_path) else other_path
                    self.err(where, f"the {what} port {port} is also the {other_what} port; every port must be "
                                    "distinct")
        if backend == "ray" and api_port in RAY_WELL_KNOWN_PORTS:
            self.err(api_path, f"port {api_port} is taken by the {RAY_WELL_KNOWN_PORTS[api_port]} on the head")
        return tuple(f"{port} {what}" for port, _, what in used)

    def _check_args(self, kind: str, args: list[str]) -> None:
        managed = MANAGED_FLAGS[kind]
        for i, word in enumerate(args):
            flag = word.split("=", 1)[0]
            if flag in managed:
                self.err(("engine", "args", i), f"{flag} is set by sparkc; use {managed[flag]} instead")

    def _check_secrets(self, container: dict[str, Any]) -> None:
        secrets = set(container["secrets"])
        sections: list[tuple[Path, dict[str, Any]]] = [(("container", "env"), container["env"]),
                                                       (("engine", "env"), self.spec["engine"]["env"])]
        sections += [(("cluster", "nodes", i, "env"), n["env"]) for i, n in enumerate(self.spec["cluster"]["nodes"])]
        for path, env in sections:
            for name in env:
                if name in secrets:
                    self.err(path + (name,), f"{name} is listed in container.secrets; do not also set it here")
                elif SECRET_NAME.search(name.upper()):
                    self.err(path + (name,), f"{name} looks like a secret: a value here would be written into "
                                             "the scripts and the manifest; list the name under "
                                             "container.secrets and export it where the launcher runs")

    # -- entrypoints -------------------------------------------------------------------------

    def _entrypoint_mode(self, container: dict[str, Any], profile: Profile | None, kind: str) -> str:
        mode = container["entrypoint"]
        path = ("container", "entrypoint")
        if profile is None:
            known = ", ".join(sorted(m for p in load_profiles() for m in p.match))
            self.warn(("container", "image"), f"no profile for image '{container['image']}': sparkc cannot tell "
                                              f"what its entrypoint does (known: {known}); "
                                              "entrypoint auto means bypass")
            if mode == "adapt":
                self.err(path, "adapt needs a known image profile (the variables its entrypoint reads); "
                               "use bypass")
            elif mode == "keep":
                self.warn(path, "keep with an unknown image: sparkc assumes the entrypoint runs the command "
                                "as given")
            return "bypass" if mode == "auto" else mode
        if mode == "auto":
            return profile.auto
        return mode

    def _effective(self, requested: dict[str, str], profile: Profile | None, mode: str,
                   container: dict[str, Any], engine: dict[str, Any]) -> tuple[list[Effective], dict[str, str]]:
        """What the engine will really use, and the variables adapt sets so it matches the spec."""
        effective: list[Effective] = []
        adapt_env: dict[str, str] = {}
        spec_env = {**container["env"], **engine["env"]}
        for setting in ("model_path", "host", "port", "max_model_len", "gpu_memory_utilization"):
            want = requested[setting]
            control = profile.control(setting) if profile and profile.args == "env-driven" else None
            if control is None or mode == "bypass":
                effective.append(Effective(setting, want, want))
            elif mode == "adapt":
                value = want or control.default
                adapt_env[control.env] = value
                effective.append(Effective(setting, want or "", value,
                                           "" if want else f"the entrypoint's default {control.env}={value}"))
            else:  # keep: the entrypoint decides from the environment it sees
                if control.env in spec_env:
                    value, reason = str(spec_env[control.env]), f"{control.env} is set in the spec's env"
                else:
                    value, reason = control.default, (f"entrypoint: keep; the image's entrypoint reads "
                                                      f"{control.env} (default {control.default}) and ignores "
                                                      "the command line for it")
                effective.append(Effective(setting, want, value, reason if value != want else ""))
        return effective, adapt_env

    def _container_command(self, argv: tuple[str, ...], profile: Profile | None,
                           mode: str) -> tuple[str, tuple[str, ...]]:
        """(--entrypoint override or "", command words) that make the container run `argv`."""
        if mode == "bypass":
            return argv[0], argv[1:]
        if profile is None or profile.args == "command":
            return "", argv
        if profile.args == "engine-args":
            prefix = profile.entrypoint or ()
            return "", argv[len(prefix):] if argv[:len(prefix)] == prefix else argv
        return "", self._env_driven_words(argv, profile)

    def _env_driven_words(self, argv: tuple[str, ...], profile: Profile) -> tuple[str, ...]:
        """The words an env-driven entrypoint appends: the engine flags minus the ones it controls."""
        controlled = {"--port", "--host", "--max-model-len", "--gpu-memory-utilization"}
        words = list(argv[3:])  # drop `vllm serve MODEL`: the entrypoint names the model itself
        kept: list[str] = []
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word in controlled:
                skip = True
                continue
            kept.append(word)
        return tuple(kept)

    def _ray_engine_exec(self, container: str, argv: tuple[str, ...], profile: Profile | None,
                         mode: str) -> tuple[str, ...]:
        """`docker exec` of the engine on the Ray head; output goes to the container's own stdout/stderr
        so `docker logs` shows it, and the exit status lands in a file the launcher watches."""
        if mode != "bypass" and profile is not None and profile.args == "env-driven" and profile.entrypoint:
            argv = tuple(profile.entrypoint) + self._env_driven_words(argv, profile)
        return ("docker", "exec", "-d", container, "sh", "-c", ENGINE_WRAPPER, "sparkc-engine") + argv

    def _ray_start(self, node: dict[str, Any], rank: int, head: dict[str, Any],
                   launch: dict[str, Any]) -> tuple[str, ...]:
        common = (f"--node-ip-address={node['fabric']['ip']}", f"--num-gpus={node['gpus']}",
                  f"--object-store-memory={launch['ray_object_store_memory']}", "--disable-usage-stats", "--block")
        if rank == 0:
            return ("ray", "start", "--head", f"--port={launch['ray_port']}") + common
        return ("ray", "start", f"--address={head['fabric']['ip']}:{launch['ray_port']}") + common

    # -- engine command line -------------------------------------------------------------------

    def _engine_argv(self, kind: str, backend: str, mount: str, served: str, eff: dict[str, str],
                     engine: dict[str, Any], nnodes: int, rank: int, head_ip: str, launch: dict[str, Any],
                     engine_timeout: int) -> tuple[str, ...]:
        tp, pp = engine["tensor_parallel"], engine["pipeline_parallel"]
        if kind == "vllm":
            argv = ["vllm", "serve", mount, "--served-model-name", served, "--host", eff["host"],
                    "--port", eff["port"], "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp)]
            if eff["max_model_len"]:
                argv += ["--max-model-len", eff["max_model_len"]]
            if eff["gpu_memory_utilization"]:
                argv += ["--gpu-memory-utilization", eff["gpu_memory_utilization"]]
            if backend == "ray":
                argv += ["--distributed-executor-backend", "ray"]
            elif nnodes > 1:
                argv += ["--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", head_ip,
                         "--master-port", str(launch["master_port"])]
                if rank > 0:
                    argv.append("--headless")
        else:
            argv = ["python3", "-m", "sglang.launch_server", "--model-path", mount, "--served-model-name", served,
                    "--host", eff["host"], "--port", eff["port"], "--tp", str(tp)]
            if pp > 1:
                argv += ["--pp-size", str(pp)]
            if eff["max_model_len"]:
                argv += ["--context-length", eff["max_model_len"]]
            if eff["gpu_memory_utilization"]:
                argv += ["--mem-fraction-static", eff["gpu_memory_utilization"]]
            if nnodes > 1:
                argv += ["--nnodes", str(nnodes), "--node-rank", str(rank),
                         "--dist-init-addr", f"{_host_port(head_ip, launch['master_port'])}",
                         "--dist-timeout", str(engine_timeout)]
        if engine["trust_remote_code"]:
            argv.append("--trust-remote-code")
        if "reasoning_parser" in engine:
            argv += ["--reasoning-parser", engine["reasoning_parser"]]
        return tuple(argv + list(engine["args"]))

    # -- environment ---------------------------------------------------------------------------

    def _node_env(self, node: dict[str, Any], index: int, head: dict[str, Any], rank: int, kind: str,
                  backend: str, multi: bool, engine_timeout: int,
                  adapt_env: dict[str, str], nccl_check: bool) -> tuple[Setting, ...]:
        fabric = node["fabric"]
        ip, netdev, hcas = fabric["ip"], fabric["netdev"], fabric["hcas"]
        env: dict[str, Setting] = {}

        def put(name: str, value: Any, source: str, why: str) -> None:
            env[name] = Setting(name, _env_str(value), source, why)

        for name in IFNAME_VARS:
            put(name, netdev, "derived", "this node's fabric netdev (cluster.nodes[].fabric.netdev)")
        if hcas:
            exact = any(h.startswith("=") for h in hcas)
            put("NCCL_IB_HCA", ("=" if exact else "") + ",".join(h.lstrip("=") for h in hcas), "derived",
                "this node's RDMA devices; without it NCCL can fall back to sockets")
            put("NCCL_IB_DISABLE", "0", "derived", "the node lists RDMA devices")
        else:
            put("NCCL_IB_DISABLE", "1", "derived", "the node lists no RDMA devices: NCCL uses sockets")
        put("MASTER_ADDR", head["fabric"]["ip"], "derived", "the head's fabric IP")
        put("MASTER_PORT", self.spec["launch"]["master_port"], self._source("launch", "master_port"),
            "launch.master_port")
        if kind == "vllm":
            put("VLLM_HOST_IP", ip, "derived", "this node's fabric IP; vLLM otherwise picks the default-route NIC")
            put("VLLM_ENGINE_READY_TIMEOUT_S", engine_timeout, "derived",
                f"launch.timeout minus {ENGINE_TIMEOUT_MARGIN}s, so the engine gives up before the launcher")
        else:
            put("SGLANG_HOST_IP", ip, "derived", "this node's fabric IP; SGLang otherwise advertises another NIC")
        if backend == "ray":
            put("RAY_NODE_IP_ADDRESS", ip, "derived", "this node's fabric IP")
            put("RAY_OVERRIDE_NODE_IP_ADDRESS", ip, "derived", "this node's fabric IP")
            put("RAY_memory_monitor_refresh_ms", "0", "default", "Ray's OOM killer misreads unified memory")
        put("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "default", "unified memory: less fragmentation")
        put("HF_HUB_OFFLINE", "1", "default", "weights are local: no node downloads on its own")
        topology = self.spec["cluster"].get("topology") or ("direct" if len(self.spec["cluster"]["nodes"]) <= 2
                                                             else "switch")
        if topology in ("mesh", "ring"):
            for name, value in (("NCCL_IB_SUBNET_AWARE_ROUTING", "1"), ("NCCL_IB_MERGE_NICS", "0"),
                                ("NCCL_NET_PLUGIN", "none")):
                put(name, value, "derived", f"topology {topology}: no switch between the nodes")
            if topology == "ring":
                put("NCCL_ALGO", "Ring", "derived", "topology ring")
        if nccl_check:
            put("NCCL_DEBUG", "INFO", "derived", "launch.nccl_check: the launcher reads NCCL's transport lines")
            put("NCCL_DEBUG_SUBSYS", "INIT,NET", "derived", "launch.nccl_check: only what the check needs")
        for name, value in sorted(adapt_env.items()):
            put(name, value, "profile", "entrypoint: adapt; the image's entrypoint reads it")
        layers = ((("container", "env"), self.spec["container"]["env"]),
                  (("engine", "env"), self.spec["engine"]["env"]),
                  (("cluster", "nodes", index, "env"), node["env"]))
        for path, extra in layers:
            for name, value in sorted(extra.items()):
                if name in IFNAME_VARS and path[0] != "cluster" and multi:
                    self.warn(path + (name,), f"{name} set for every node overrides the per-node fabric netdev; "
                                              "set it per node (cluster.nodes[].env) if the names differ")
                if name == "GLOO_SOCKET_IFNAME" and re.search(r"[,^=]", _env_str(value)):
                    self.err(path + (name,), "GLOO_SOCKET_IFNAME must be one interface name; Gloo crashes on "
                                             "NCCL-style lists ('^lo', 'a,b', '=if')")
                if name == "NCCL_IB_GID_INDEX" and _env_str(value) == "":
                    self.err(path + (name,), "an empty NCCL_IB_GID_INDEX means GID 0; remove it to let NCCL "
                                             "pick the RoCEv2 GID")
                put(name, value, "spec", ".".join(str(p) for p in path[:2]) + " (" + name + ")")
        return tuple(env[k] for k in sorted(env))

    # -- docker --------------------------------------------------------------------------------

    def _docker_run(self, node: dict[str, Any], name: str, labels: tuple[str, ...], container: dict[str, Any],
                    model: dict[str, Any], mount: str, env: tuple[Setting, ...], entry_override: str,
                    command: tuple[str, ...]) -> tuple[str, ...]:
        argv = ["docker", "run", "-d", "--name", name]
        for label in labels + (f"sparkc.node={node['name']}",):
            argv += ["--label", label]
        # No --rm (a crash must leave its logs) and no restart policy (ranks must start in order).
        argv += ["--network", "host", "--ipc", "host"]
        if container["gpus"] == "all":
            argv += ["--gpus", "all"]
        if container["privileged"]:
            argv.append("--privileged")
        else:
            if node["fabric"]["hcas"]:
                argv += ["--device", "/dev/infiniband"]
            argv += ["--cap-add", "IPC_LOCK"]
        ulimits = {**DEFAULT_ULIMITS, **container["ulimits"]}
        for limit, value in sorted(ulimits.items()):
            if value is not None:
                argv += ["--ulimit", f"{limit}={value}"]
        if "shm_size" in container:
            argv += ["--shm-size", container["shm_size"]]
        argv += ["-v", f"{model['path']}:{mount}:ro"]
        for m in container["mounts"]:
            argv += ["-v", f"{m['host']}:{m['container']}" + (":ro" if m["readonly"] else "")]
        for setting in env:
            argv += ["-e", f"{setting.name}={setting.value}"]
        for secret in container["secrets"]:
            argv += ["-e", secret]  # value taken from the environment of the docker client, never the argv
        if entry_override:
            argv += ["--entrypoint", entry_override]
        return tuple(argv + [container["image"]] + list(command))

    @staticmethod
    def _nccl_transport(node: dict[str, Any], rank: int, backend: str, nodes: list[dict[str, Any]]) -> str:
        """What NCCL must report in this node's container log; "" where nothing is logged there.
        Ray forwards every worker's output to the engine on the head, so the head speaks for all."""
        if backend == "ray":
            return ("IB" if all(n["fabric"]["hcas"] for n in nodes) else "Socket") if rank == 0 else ""
        return "IB" if node["fabric"]["hcas"] else "Socket"

    @staticmethod
    def _ssh_options(ssh: dict[str, Any]) -> tuple[str, ...]:
        options = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={ssh['connect_timeout']}",
                   "-o", "ServerAliveInterval=15", "-p", str(ssh["port"])]
        if "identity_file" in ssh:
            options += ["-i", ssh["identity_file"], "-o", "IdentitiesOnly=yes"]
        for option in ssh["options"]:
            options += ["-o", option]
        return tuple(options)

    # -- explanation ---------------------------------------------------------------------------

    def _given_path(self, path: Path) -> bool:
        node: Any = self.given
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    def _source(self, section: str, key: str) -> str:
        return "spec" if key in (self.given.get(section) or {}) else "default"

    def _quirks(self, profile: Profile | None, mode: str, backend: str) -> tuple[str, ...]:
        if profile is None:
            return ("no image profile: the entrypoint is bypassed unless the spec says keep",)
        quirks = [f"profile {profile.id} ({profile.family}); entrypoint: {mode}"]
        quirks += list(profile.notes)
        if mode == "bypass":
            quirks += [f"bypassed entrypoint skips: {s}" for s in profile.side_effects]
        else:
            quirks += [f"entrypoint side effect kept: {s}" for s in profile.side_effects]
        if backend == "ray":
            quirks.append("Ray containers run `ray start` with --entrypoint ray; the engine starts by docker exec")
        return tuple(quirks)

    def _settings(self, spec: dict[str, Any], kind: str, backend: str, mode: str, profile: Profile | None,
                  api_port: int, total_gpus: int, launch: dict[str, Any], engine_timeout: int,
                  nccl_check: bool) -> tuple[Setting, ...]:
        engine = spec["engine"]
        src = self._source

        return (
            Setting("engine", kind, "spec"),
            Setting("backend", backend, "spec" if "backend" in engine else "default",
                    "" if "backend" in engine else "vLLM on several nodes: ray; otherwise native"),
            Setting("entrypoint", mode, "profile" if spec["container"]["entrypoint"] == "auto" and profile
                    else src("container", "entrypoint"), f"profile {profile.id}" if profile else ""),
            Setting("api_port", str(api_port), "spec" if "port" in engine else "default"),
            Setting("tensor_parallel", str(engine["tensor_parallel"]), src("engine", "tensor_parallel")),
            Setting("pipeline_parallel", str(engine["pipeline_parallel"]), src("engine", "pipeline_parallel")),
            Setting("total_gpus", str(total_gpus), "derived", "sum of cluster.nodes[].gpus"),
            Setting("launch_timeout", str(launch["timeout"]), src("launch", "timeout")),
            Setting("engine_timeout", str(engine_timeout), "derived", f"launch.timeout - {ENGINE_TIMEOUT_MARGIN}"),
            Setting("ray_port", str(launch["ray_port"]), src("launch", "ray_port")),
            Setting("master_port", str(launch["master_port"]), src("launch", "master_port")),
            Setting("nccl_check", "on" if nccl_check else "off", src("launch", "nccl_check"),
                    "" if "nccl_check" in launch else "on for several nodes with RDMA devices"),
        )


_SETTING_PATHS: dict[str, Path] = {
    "model_path": ("model", "path"),
    "host": ("engine", "host"),
    "port": ("engine", "port"),
    "max_model_len": ("engine", "max_model_len"),
    "gpu_memory_utilization": ("engine", "gpu_memory_utilization"),
    "served_model_name": ("model", "name"),
}


def _env_str(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _roce_name(netdev: str) -> str:
    """enp1s0f1np1 -> rocep1s0f1 (DOMAIN.md's rule); "" when the name is not of that shape."""
    match = re.fullmatch(r"en(P?\d*p\d+s\d+f\d+)(np\d+)?", netdev)
    return f"roce{match.group(1)}" if match else ""
