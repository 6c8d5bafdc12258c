"""`sparkc compile --target kubernetes`: the plan as Kubernetes manifests in kubernetes/, built by kustomize.

Every container value (variables, mounts, devices, the command and the image's entrypoint) is read from
the node's `docker run` words in the plan (compiler/output/docker_words.py), so a pod runs what the ssh
target's container runs. What the ssh target's launcher does around the containers (preflight, the fabric
probe, NCCL's transport check, dropping the page cache, host hooks) has no counterpart here.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable
from typing import Any

from ruamel.yaml import YAML

from compiler.diagnostics import Diagnostic, error
from compiler.output.docker_words import DockerRun, read_docker_run
from compiler.output.folder_guard import KUBERNETES
from compiler.output.render import quote
from compiler.plan import NodePlan, Plan, Role
from compiler.spec.typed import Backend

FOLDER = KUBERNETES
# Where the scripts and the operator find the manifests, and the one file `kubectl apply -k` reads.
KUSTOMIZATION = f"{FOLDER}/kustomization.yaml"
SERVICE = f"{FOLDER}/service.yaml"
# The Kubernetes versions whose OpenAPI schema the tests validate every example's manifests against.
SUPPORTED_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
# A StatefulSet's name becomes its pod's `controller-revision-hash` label with a suffix of 11 characters,
# and a label value holds at most 63.
MAX_OBJECT_NAME = 52
# The NVIDIA GPU operator's device plugin resource, and the RDMA shared device plugin's resource as NVIDIA's
# network operator names it in its documentation; a kustomize patch renames it where a cluster differs.
GPU_RESOURCE = "nvidia.com/gpu"
RDMA_RESOURCE = "rdma/rdma_shared_device_a"
# Where secrets come from: one Secret per deployment, a key per variable (container.secrets).
SECRET_SUFFIX = "-secrets"
# Every engine sparkc runs answers here once it serves (the ssh target's launcher checks the same path).
HEALTH_PATH = "/health"
STARTUP_PERIOD = 10
# The deployment's own label, on every object and in every selector.
INSTANCE_LABEL = "app.kubernetes.io/instance"
NODE_LABEL = "sparkc.dev/node"
ROLE_LABEL = "sparkc.dev/role"

# The head's container under Ray: the head's own command (ray start, without --block: it returns once the
# head is up), then the engine in the foreground, as the ssh target's launcher runs it by docker exec. The
# engine's words are the arguments; the first (`$0`) names the program in messages.
_RAY_HEAD_TAIL = """\
if [ -n "${SPARKC_RAY_NON_CARRY_OVER:-}" ]; then
  # vLLM's Ray executor copies the head's variables to every worker, except those named here
  mkdir -p "$VLLM_CONFIG_ROOT" &&
    printf "%s\\n" "$SPARKC_RAY_NON_CARRY_OVER" >"$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json"
fi
exec "$@"
"""

# An init container's program: wait until the head accepts connections on a port, then end. Each attempt
# gives up after a few seconds and the next one follows a short pause; there is no overall limit (the
# pod waits for its head as long as the head takes).
_WAIT_FOR_PORT = """\
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
while True:
    try:
        socket.create_connection((host, port), timeout=5).close()
        break
    except OSError:
        time.sleep(2)
print(f"{host}:{port} accepts connections")
"""


# The kubelet reads `$(NAME)` in a command, its arguments and a variable's value as that variable's value, and
# `$$` as one `$`. Each `$` before `(` or `$` is doubled, so every word reaches the container as written.
_EXPANDED = re.compile(r"\$(?=[($])")


def literal(word: str) -> str:
    """`word` as the kubelet must be given it to pass it on unchanged."""
    return _EXPANDED.sub("$$", word)


def object_name(plan: Plan, node: NodePlan) -> str:
    return f"{plan.name}-{node.name}"


def node_file(node: NodePlan) -> str:
    """A node's file in kubernetes/ (prefixed: a node may be named `service`)."""
    return f"node-{node.name}.yaml"


def secret_name(plan: Plan) -> str:
    return plan.name + SECRET_SUFFIX


def refusals(plan: Plan) -> list[Diagnostic]:
    """What this plan needs that the StatefulSets cannot give, each at the spec field that asks for it."""
    target = "--target kubernetes"
    found = shared_refusals(plan, target)
    longest = max(plan.nodes, key=lambda n: len(object_name(plan, n)))
    if len(object_name(plan, longest)) > MAX_OBJECT_NAME:
        found.append(
            error(
                ("name",),
                f"{target}: the StatefulSet {object_name(plan, longest)} (NAME-NODE) is "
                f"{len(object_name(plan, longest))} characters; Kubernetes allows {MAX_OBJECT_NAME}: "
                "shorten the name or the node's",
            )
        )
    return found


def shared_refusals(plan: Plan, target: str) -> list[Diagnostic]:
    """What no Kubernetes target can give (`target` names the one asked for in the messages)."""
    found = []
    if plan.backend is Backend.MPI:
        found.append(
            error(
                ("engine", "backend"),
                f"{target}: backend mpi starts the ranks by mpirun over ssh between the containers, which pods "
                "do not offer; use --target ssh for this engine",
            )
        )
    if plan.hooks is not None and plan.hooks.patches:
        found.append(
            error(
                ("container", "hooks", "patches"),
                f"{target}: the ssh target's launcher copies the patch folder to every node; nothing copies it "
                "to Kubernetes nodes (put the files in the image, or use --target ssh)",
            )
        )
    if plan.host_hooks is not None:
        found.append(
            error(
                ("cluster", "hooks"),
                f"{target}: cluster.hooks run on each node's host over ssh before the containers start; "
                "Kubernetes runs nothing on the hosts (run them when the nodes are provisioned and remove them here)",
            )
        )
    if plan.model.hf == "ref":
        found.append(
            error(
                ("model", "revision"),
                f"{target}: the ssh target's launcher reads the commit of {plan.model.revision} on every node; a "
                "hostPath must name the snapshot itself: give the commit",
            )
        )
    for mount in plan.home_mounts:
        found.append(
            error(
                ("container", "mounts", mount.index, "host"),
                f"{target}: a hostPath volume needs an absolute path, and no one asks a Kubernetes node for the "
                f"ssh user's home that ~/ stands for: write the folder's absolute path, such as "
                f"/home/USER/{mount.host[2:]}",
            )
        )
    return found


def render_kubernetes(plan: Plan) -> dict[str, str]:
    """kubernetes/: a StatefulSet per node, the Services, and the kustomization naming them."""
    files = {f"{FOLDER}/{node_file(node)}": _node_file(plan, node) for node in plan.nodes}
    files[SERVICE] = dump(HEADER, api_service(plan), _node_service(plan))
    resources = ["service.yaml", *(node_file(node) for node in plan.nodes)]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    files[KUSTOMIZATION] = dump(HEADER + _KUSTOMIZE_NOTE, kustomization)
    return files


HEADER = "# Written by sparkc compile --target kubernetes; compile again rather than edit.\n"
_KUSTOMIZE_NOTE = f"""\
# kubectl apply -k DIR/kubernetes. Adapt it to a cluster with your own kustomization that names this folder:
# a namespace; the RDMA resource where your device plugin names another than {RDMA_RESOURCE};
# the Secret {{name}}{SECRET_SUFFIX} with one key per variable of container.secrets (created by you, never here).
"""


def labels_of(plan: Plan, node: NodePlan | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": "sparkc", INSTANCE_LABEL: plan.name}
    if node is not None:
        labels[NODE_LABEL] = node.name
        labels[ROLE_LABEL] = str(node.role)
    return labels


def api_service(plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{plan.name}-api", "labels": labels_of(plan)},
        "spec": {
            "selector": {INSTANCE_LABEL: plan.name, ROLE_LABEL: str(Role.HEAD)},
            "ports": [{"name": "http", "port": plan.api_port, "targetPort": plan.api_port, "protocol": "TCP"}],
        },
    }


def _node_service(plan: Plan) -> dict[str, Any]:
    """The headless Service a StatefulSet names (its pods' DNS names); no traffic goes through it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{plan.name}-nodes", "labels": labels_of(plan)},
        "spec": {"clusterIP": "None", "selector": {INSTANCE_LABEL: plan.name}},
    }


def _node_file(plan: Plan, node: NodePlan) -> str:
    run = read_docker_run(node.docker_run, plan.image)
    limits = ", ".join(f"{limit}={value}" for limit, value in run.ulimits)
    note = f"""\
# {node.name}, rank {node.rank} ({node.role}): a StatefulSet of one replica rather than a bare Pod, so that
# the pod comes back after an eviction or a deletion, and never two at once on the node (a Deployment's
# rollout could start the new pod beside the old one, both holding the GPU and the host's ports).
# Kubernetes sets no ulimits ({limits} in the ssh target):
# the container runtime's own limits apply (RDMA needs memlock unlimited: containerd's systemd unit sets
# LimitMEMLOCK=infinity; check yours).
"""
    return dump(HEADER + note, _stateful_set(plan, node, run))


def _stateful_set(plan: Plan, node: NodePlan, run: DockerRun) -> dict[str, Any]:
    labels = labels_of(plan, node)
    pod = pod_spec(plan, node, run, {"nodeSelector": {"kubernetes.io/hostname": node.name}})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": object_name(plan, node), "labels": labels},
        "spec": {
            "replicas": 1,
            "serviceName": f"{plan.name}-nodes",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def pod_spec(
    plan: Plan, node: NodePlan, run: DockerRun, placement: dict[str, Any], word: Callable[[str], str] = literal
) -> dict[str, Any]:
    """The pod that runs `run` as `node`'s container; `placement` says where it may run, and `word` writes each
    word of the command, its arguments and the variables' values (by default exactly as they are)."""
    pod: dict[str, Any] = placement | {
        "hostNetwork": run.host_network,
        "hostIPC": run.host_ipc,
        # The node's own resolver, as the ssh target's containers on the host's network have it.
        "dnsPolicy": "Default",
        # No Service variables (NAME_PORT=tcp://...): the environment is the ssh target's, exactly.
        "enableServiceLinks": False,
    }
    init = _start_order(plan, node)
    if init:
        pod["initContainers"] = init
    pod["containers"] = [_container(plan, node, run, word)]
    pod["volumes"] = [
        {"name": f"host-{i}", "hostPath": {"path": m.host} | ({} if m.readonly else {"type": "DirectoryOrCreate"})}
        for i, m in enumerate(run.mounts)
    ]
    return pod


def _container(plan: Plan, node: NodePlan, run: DockerRun, word: Callable[[str], str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": run.image, "imagePullPolicy": "IfNotPresent"}
    command, args = _command(plan, node, run)
    if command:
        container["command"] = [word(w) for w in command]
    if args:
        container["args"] = [word(w) for w in args]
    env: list[dict[str, Any]] = [{"name": name, "value": word(value)} for name, value in run.env]
    # Secrets by reference only: the value stays in the Secret, never in these files.
    env += [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name(plan), "key": name}}} for name in run.passed
    ]
    container["env"] = env
    limits: dict[str, int] = {}
    if run.all_gpus:
        limits[GPU_RESOURCE] = node.gpus
    if "/dev/infiniband" in run.devices:
        limits[RDMA_RESOURCE] = 1
    if limits:
        container["resources"] = {"limits": limits}
    security: dict[str, Any] = {"privileged": True} if run.privileged else {}
    if run.capabilities:
        security["capabilities"] = {"add": list(run.capabilities)}
    if security:
        container["securityContext"] = security
    container["volumeMounts"] = [
        {"name": f"host-{i}", "mountPath": m.container} | ({"readOnly": True} if m.readonly else {})
        for i, m in enumerate(run.mounts)
    ]
    if node.role is Role.HEAD:
        container.update(_probes(plan))
    return container


def _command(plan: Plan, node: NodePlan, run: DockerRun) -> tuple[list[str], list[str]]:
    """(command, args): the container's entrypoint override and its words, as docker's --entrypoint and the
    words after the image; command empty keeps the image's entrypoint, as the profile decided."""
    own = ([run.entrypoint] if run.entrypoint else []) + list(run.args)
    if node.role is not Role.HEAD or not plan.ray_engine:
        return ([run.entrypoint] if run.entrypoint else []), list(run.args)
    if not run.entrypoint:
        raise ValueError("the Ray head's container names no entrypoint")
    start = " ".join(quote(word) for word in own if word != "--block")
    engine = [word for group in plan.ray_engine for word in group]
    return ["sh", "-c", f"{start} || exit\n{_RAY_HEAD_TAIL}", "sparkc-ray-head"], engine


def _start_order(plan: Plan, node: NodePlan) -> list[dict[str, Any]]:
    """Under Ray, a worker's `ray start` joins the head's: an init container waits for the head's Ray port.
    Without Ray the ranks meet at the head's rendezvous and wait for each other themselves (torch's store
    and the engines retry until their own start timeout), as under the ssh target, which starts the
    workers first."""
    if plan.backend is not Backend.RAY or node.role is Role.HEAD:
        return []
    return [
        {
            "name": "wait-for-head",
            "image": plan.image,
            "imagePullPolicy": "IfNotPresent",
            "command": [literal(w) for w in ("python3", "-c", _WAIT_FOR_PORT, plan.head_fabric_ip, str(plan.ray_port))],
        }
    ]


def _probes(plan: Plan) -> dict[str, Any]:
    get: dict[str, Any] = {"path": HEALTH_PATH, "port": plan.api_port}
    if plan.api_bind_host not in ("0.0.0.0", "::"):
        get["host"] = plan.api_bind_host  # the kubelet asks the node's address, which the engine may not serve
    return {
        # Loading the weights and forming the group take up to launch.timeout; until then the others wait.
        "startupProbe": {
            "httpGet": get,
            "periodSeconds": STARTUP_PERIOD,
            "failureThreshold": max(1, math.ceil(plan.launch_timeout / STARTUP_PERIOD)),
        },
        "readinessProbe": {"httpGet": get, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {"httpGet": get, "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 3},
    }


def _string(representer: Any, text: str) -> Any:
    """A script as the lines it has (a literal block); any other string as YAML's own rules write it."""
    style = "|" if "\n" in text and _block_safe(text) else None
    return representer.represent_scalar("tag:yaml.org,2002:str", text, style=style)


def _block_safe(text: str) -> bool:
    """A literal block holds the text exactly: printable lines, none ending in a space."""
    return all(line.isprintable() and not line.endswith(" ") for line in text.split("\n"))


def dump(header: str, *documents: dict[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096  # one value, one line: a long variable stays greppable
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # the keys in the order Kubernetes' documentation shows them
    yaml.representer.ignore_aliases = lambda _: True  # each object written out whole, no &anchors
    yaml.representer.add_representer(str, _string)
    out = io.StringIO()
    out.write(header)
    for document in documents:
        out.write("---\n")
        yaml.dump(document, out)
    return out.getvalue()
