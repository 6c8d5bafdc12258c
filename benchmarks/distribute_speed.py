"""distribute.sh's copies against the links they run on: the simulated cluster with every fabric link shaped
by tc (a rate per link, and a lower cap per flow with fq's maxrate, as one ssh stream on a Spark gets only a
share of its link), an image and a weights folder copied with the generated distribute.sh to 1 worker over a
direct link, to 2 workers in a 3-node mesh and to 3 workers round a 4-node ring. Per case: the bytes each
worker received, the seconds the whole run took (saving, copying, loading and checking), the floor (those
bytes at the link's rate: every route copies at once, and a ring pipelines through each node, so one link's
time is the floor) and their ratio.

    flock /tmp/sparkc-simcluster.lock python benchmarks/distribute_speed.py [--quick] [--json FILE]

Root only (namespaces, dockerd, tc); it brings each cluster up and down itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simcluster import SimCluster
from simcluster.cluster import PORT0, PORT1
from simcluster.images import VLLM_IMAGE
from simcluster.net import MGMT_IF
from tests.cluster.deployment import Deployment, sim_spec
from tests.specs import DELETE

MODEL = "/run/sparkc-bench-model"  # /run is each node's own: the folder differs per node
RATES = {"mbit": 1_000_000 / 8, "gbit": 1_000_000_000 / 8}
CASES = {"direct": ("switch", 2), "mesh": ("mesh", 3), "ring": ("ring", 4)}
EXAMPLE = {"direct": "llama33-70b-2spark-native.yaml", "mesh": "qwen3-32b-3spark-mesh.yaml"}


def rate_bytes(rate: str) -> float:
    match = re.fullmatch(r"(\d+)(mbit|gbit)", rate)
    if match is None:
        raise SystemExit(f"--rate {rate}: write it as tc does, e.g. 200mbit or 1gbit")
    return int(match.group(1)) * RATES[match.group(2)]


def shape(cluster: SimCluster, rate: str, flow: str) -> None:
    """Each fabric netdev's egress at RATE (htb) and each TCP flow in it at FLOW: the flows are spread by the
    low byte of their source port (u32's hash) over 256 htb classes of FLOW each. (This kernel has no fq, whose
    maxrate would cap each flow exactly; two flows that share a bucket share its cap, which only slows a copy.)
    Each class is assured only its 256th of RATE and borrows the rest up to FLOW from the link's class: htb
    lets a class send its assured rate whatever its parent holds, so assured rates that add up to more than
    RATE would let the link carry more than RATE."""
    share = f"{max(8, int(rate_bytes(rate) * 8 / 256 / 1000))}kbit"
    for node in cluster.nodes:
        netdevs = list(cluster.ports(node)) if cluster.links else [node.fabric_netdev]
        for dev in netdevs:
            lines = [
                f"qdisc add dev {dev} root handle 1: htb default 2 r2q 1000",
                f"class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate}",
                f"class add dev {dev} parent 1:1 classid 1:2 htb rate {share} ceil {flow}",
                f"filter add dev {dev} parent 1: prio 1 handle 2: protocol ip u32 divisor 256",
            ]
            for b in range(256):
                lines.append(f"class add dev {dev} parent 1:1 classid 1:{0x100 + b:x} htb rate {share} ceil {flow}")
                bucket = f"ht 2:{b:x}: match u32 0 0 flowid 1:{0x100 + b:x}"
                lines.append(f"filter add dev {dev} parent 1: prio 1 protocol ip u32 {bucket}")
            lines.append(
                f"filter add dev {dev} parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff"
                " hashkey mask 0x00ff0000 at 20 link 2:"
            )
            subprocess.run(
                ["ip", "netns", "exec", node.netns, "tc", "-batch", "-"],
                input="\n".join(lines) + "\n",
                check=True,
                capture_output=True,
                text=True,
            )


def cpu_busy_seconds() -> float:
    """Seconds this machine's CPUs have spent busy (all processes, all simulated nodes), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def mgmt_bytes(cluster: SimCluster) -> int:
    """Bytes every node sent on the management network: a copy there would show."""
    total = 0
    for node in cluster.nodes:
        out = cluster.sh(node, f"cat /sys/class/net/{MGMT_IF}/statistics/tx_bytes").stdout
        total += int(out.strip() or 0)
    return total


def make_weights(cluster: SimCluster, sizes: Sequence[int]) -> int:
    script = f"rm -rf {MODEL} && mkdir -p {MODEL} && echo '{{}}' > {MODEL}/config.json"
    for i, size in enumerate(sizes):
        script += f" && head -c {size} /dev/urandom > {MODEL}/model-{i:05d}.safetensors"
    cluster.sh(cluster.head, script, check=True)
    return sum(sizes) + 3


def spec_for(cluster: SimCluster, case: str, tmp: Path) -> dict[str, Any]:
    changes: dict[str, Any] = {"container.image": VLLM_IMAGE, "model.architecture": DELETE, "model.path": MODEL}
    if cluster.links:
        changes["cluster.nodes"] = [
            {
                "name": n.name,
                "ssh": n.mgmt_ip,
                "control": {"netdev": MGMT_IF, "ip": n.mgmt_ip},
                "fabric": {
                    "ip": n.fabric_ip,
                    "netdev": PORT0,
                    "netdevs": [PORT0, PORT1],
                    "transport": "sockets",
                    "addresses": {PORT1: cluster.ports(n)[PORT1]},
                },
            }
            for n in cluster.nodes
        ]
        changes["cluster.link_prefix_length"] = cluster.link_prefix_len
        changes["cluster.topology"] = cluster.topology
        changes["engine.tensor_parallel"] = 1
        changes["engine.pipeline_parallel"] = len(cluster.nodes) if len(cluster.nodes) != 4 else 2
        if len(cluster.nodes) == 4:
            changes["engine.tensor_parallel"] = 2
        changes["model.architecture"] = {"attention_heads": 6, "kv_heads": 6}
    example = EXAMPLE.get(case, "llama33-70b-4spark-ring.yaml")
    return sim_spec(cluster, example, f"bench{case}", len(cluster.nodes), tmp, changes)


def run_case(case: str, args: argparse.Namespace, weights: Sequence[int]) -> dict[str, Any]:
    topology, count = CASES[case]
    cluster = SimCluster(
        count,
        name=f"{os.environ.get('SPARKC_SIM_NAME', 'bench')}-{case}"[:24],
        topology=topology,
        link_prefix_len=30 if topology == "mesh" else 24,
    )
    cluster.up(images=(VLLM_IMAGE,))
    try:
        cluster.record_host_keys(cluster.head)
        with tempfile.TemporaryDirectory() as tmp:
            d = Deployment(cluster, spec_for(cluster, case, Path(tmp)), Path(tmp) / "build")
            weights_bytes = make_weights(cluster, weights)
            image = int(
                cluster.docker(cluster.head, "image", "inspect", "--format", "{{.Size}}", VLLM_IMAGE).stdout.strip()
            )
            for n in cluster.nodes[1:]:
                cluster.break_remove_image(n.name, VLLM_IMAGE)
            link = rate_bytes(args.rate)
            shape(cluster, args.rate, args.flow)
            before = mgmt_bytes(cluster)
            busy_before = cpu_busy_seconds()
            start = time.monotonic()
            run = d.run("distribute.sh", "--streams", str(args.streams), "--progress", str(args.progress), timeout=1800)
            seconds = time.monotonic() - start
            busy = cpu_busy_seconds() - busy_before
            if args.log:
                with args.log.open("a") as log:
                    log.write(f"== {case}\n{run.stdout}{run.stderr}")
            if args.keep:  # the build folder too, to run its scripts again by hand
                subprocess.run(["cp", "-rT", str(d.build), f"/tmp/{cluster.name}-build"], check=False)
            if run.returncode != 0:
                raise SystemExit(f"{case}: distribute.sh failed\n{run.stdout}\n{run.stderr}")
            report = [
                dict(re.findall(r"(\w+)=(\S+)", line))
                for line in (d.build / "distribute-report.txt").read_text().splitlines()
            ]
            received = max(int(e["bytes"]) for e in report if e["item"] == "image") + max(
                int(e["bytes"]) for e in report if e["item"] == "model"
            )
            floor = received / link
            return {
                "bytes": received,
                "image_bytes_docker_size": image,
                "weights_bytes": weights_bytes,
                "seconds": round(seconds, 2),
                "floor_seconds": round(floor, 2),
                "ratio": round(seconds / floor, 3),
                "workers": count - 1,
                "management_bytes_sent": mgmt_bytes(cluster) - before,
                # Near 1: this machine's cores, not the links, set the pace (every simulated node shares them).
                "cpu_busy_fraction": round(busy / (seconds * (os.cpu_count() or 1)), 2),
                "report": report,
            }
    finally:
        if not args.keep:
            cluster.teardown()
            shutil.rmtree(f"/var/tmp/sparkc-distribute/bench{case}", ignore_errors=True)  # the nodes' staging


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller weights: a run of a few minutes")
    parser.add_argument("--rate", default="50mbit", help="each fabric link's rate (tc htb)")
    parser.add_argument("--flow", default="", help="each flow's cap (fq maxrate; default a quarter of --rate)")
    parser.add_argument("--streams", type=int, default=8, help="distribute.sh --streams")
    parser.add_argument("--cases", default="direct,mesh,ring")
    parser.add_argument("--json", type=Path, help="write the results there")
    parser.add_argument("--progress", type=int, default=600, help="distribute.sh --progress")
    parser.add_argument("--log", type=Path, help="append distribute.sh's output there")
    parser.add_argument("--keep", action="store_true", help="leave the last cluster up (to look into a failure)")
    args = parser.parse_args()
    rate = rate_bytes(args.rate)
    args.flow = args.flow or f"{int(rate * 8 / 4 / 1_000_000)}mbit"
    weights = (120_000_000, 60_000_000, 20_000_000) if args.quick else (400_000_000, 200_000_000, 100_000_000)
    load = os.getloadavg()
    cases = {case: run_case(case, args, weights) for case in args.cases.split(",")}
    result = {
        "what": "distribute.sh (image and weights) on the simulated cluster, every fabric link shaped by tc",
        "rate": args.rate,
        "flow_cap": args.flow,
        "streams": args.streams,
        "quick": args.quick,
        "load_average_before": [round(x, 1) for x in load],
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "cases": cases,
    }
    for case, r in cases.items():
        print(
            f"{case:7} {r['bytes']:>12} bytes  {r['seconds']:7.1f} s  floor {r['floor_seconds']:6.1f} s  "
            f"ratio {r['ratio']:.2f}  cpu busy {r['cpu_busy_fraction']:.0%}  "
            f"management {r['management_bytes_sent']} bytes"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
