"""`sparkc setup-fabric SPEC -o DIR`: a reviewed setup-fabric.sh that gives every node its fabric address
and MTU 9000 (netplan, else NetworkManager, else live only) and the head's ssh key on the workers.

Run by the operator from a machine that reaches every node by its management address (ssh may ask
for a password: this is the step that installs keys). Idempotent; `--dry-run` changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compiler.output.library import single_quoted
from compiler.output.render import bash, environment
from compiler.resources import data_dir
from compiler.spec.typed import Spec

SCRIPT = "setup-fabric.sh"
FABRIC_MTU = 9000
DEFAULT_KEY = ""  # the node side reads it as ~/.ssh/id_ed25519 of the login user


@dataclass(frozen=True)
class FabricNode:
    name: str
    target: str  # user@host, or "" to run on this machine (a node without an ssh address)
    netdev: str
    address: str  # ip/prefix


@dataclass(frozen=True)
class FabricPlan:
    spec_path: str
    spec_sha256: str
    head: str
    nodes: tuple[FabricNode, ...]  # head first
    ssh_options: tuple[str, ...]
    head_key: str  # private key path on the head; its .pub goes to the workers
    mtu: int = FABRIC_MTU


def fabric_plan(spec: Spec, head: str, spec_path: str, spec_sha256: str, prefix: int) -> FabricPlan:
    ssh = spec.cluster.ssh
    nodes = sorted(spec.cluster.nodes, key=lambda n: n.name != head)
    options = ["-o", f"ConnectTimeout={ssh.connect_timeout}", "-p", str(ssh.port)]
    for option in ssh.options:
        options += ["-o", option]
    return FabricPlan(
        spec_path,
        spec_sha256,
        head,
        tuple(
            FabricNode(
                n.name,
                (f"{ssh.user}@{n.ssh}" if ssh.user else n.ssh) if n.ssh else "",
                n.fabric.netdev,
                f"{n.fabric.ip}/{prefix}",
            )
            for n in nodes
        ),
        tuple(options),
        ssh.identity_file or DEFAULT_KEY,
    )


def _sh_quote_function() -> str:
    """sh_quote from the launch scripts' common.sh: one quoting function for every script sparkc writes."""
    found = re.search(r"^sh_quote\(\) \{\n.*?^\}\n", bash("common.sh"), re.M | re.S)
    assert found, "templates/lib/common.sh defines sh_quote"
    return found.group(0)


def render_setup(plan: FabricPlan) -> str:
    node_script = (data_dir("templates") / "setup" / "fabric-node.sh").read_text(encoding="utf-8")
    assert "\nSPARKC_NODE_SCRIPT\n" not in node_script
    snippets = {
        f"{name}_sh": single_quoted((data_dir("templates") / "setup" / f"{file}.sh").read_text(encoding="utf-8"))
        for name, file in (("key", "head-key"), ("authorize", "authorize-key"))
    }
    template = environment().get_template("setup/setup-fabric.sh.j2")
    return template.render(plan=plan, sh_quote=_sh_quote_function(), node_script=node_script, **snippets)
