"""By-hand CLI: ``python -m simcluster up|down|status|exec|ssh|mounts|build-images|sync-runtime``.

python -m simcluster up --nodes 3 --netdev spark3=enp1s0f0np0
python -m simcluster exec spark1 -- docker ps
python -m simcluster ssh spark1 spark2 -- hostname
python -m simcluster down
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from . import images as images_mod
from .cleanup import cleanup_stale
from .cluster import TOPOLOGIES, SimCluster
from .nodes import DEFAULT_FABRIC_NETDEV, DEFAULT_NAME, WORK_ROOT, ClusterUnavailable, NodeSpec
from .runtime import VENV, container_mounts, sync_runtime


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m simcluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--name", default=DEFAULT_NAME, help="cluster name (default %(default)s)")
    p.add_argument("--work-root", type=Path, default=WORK_ROOT, help="where clusters keep their files")
    sub = p.add_subparsers(dest="cmd", required=True)

    up = sub.add_parser("up", help="start a cluster and leave it running")
    up.add_argument("--nodes", type=int, default=3, help="number of nodes spark1..sparkN (default 3)")
    up.add_argument(
        "--netdev",
        action="append",
        default=[],
        metavar="NODE=IFNAME",
        help=f"fabric netdev name of one node (default {DEFAULT_FABRIC_NETDEV})",
    )
    up.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default="switch",
        help="switch: one fabric bridge; mesh (3 nodes) or ring: each node's port 0 cabled to the next's port 1",
    )
    up.add_argument("--link-prefix-len", type=int, default=24, help="mesh and ring: each cable's subnet prefix")
    up.add_argument("--no-images", action="store_true", help="do not load the test images")
    up.add_argument("--venv", type=Path, default=VENV)

    sub.add_parser("down", help="tear the cluster down (also cleans a crashed run's leftovers)")
    sub.add_parser("status", help="show nodes, sshd, dockerd, images, containers")

    ex = sub.add_parser("exec", help="run a command on a node: exec NODE -- CMD...")
    ex.add_argument("node")
    ex.add_argument("argv", nargs=argparse.REMAINDER)

    ssh = sub.add_parser("ssh", help="ssh from one node to another: ssh FROM TO -- CMD...")
    ssh.add_argument("from_node")
    ssh.add_argument("to_node")
    ssh.add_argument("argv", nargs=argparse.REMAINDER)

    mounts = sub.add_parser("mounts", help="print the read-only mounts containers need")
    mounts.add_argument("--venv", type=Path, default=VENV)

    build = sub.add_parser("build-images", help="build (or find cached) the test images")
    build.add_argument("--venv", type=Path, default=VENV)
    build.add_argument("--out", type=Path, help="also write them as one docker-save tarball")

    sync = sub.add_parser("sync-runtime", help="copy the stand-in engine into the venv")
    sync.add_argument("--venv", type=Path, default=VENV)
    return p


def _strip_dashes(argv: list[str]) -> list[str]:
    return argv[1:] if argv[:1] == ["--"] else argv


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return _run(args)
    except ClusterUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.cmd == "up":
        netdevs = dict(item.split("=", 1) for item in args.netdev)
        specs = [
            NodeSpec(f"spark{i + 1}", netdevs.pop(f"spark{i + 1}", DEFAULT_FABRIC_NETDEV)) for i in range(args.nodes)
        ]
        if netdevs:
            print(f"error: --netdev names unknown nodes: {', '.join(netdevs)}", file=sys.stderr)
            return 2
        cluster = SimCluster(
            specs,
            name=args.name,
            work_root=args.work_root,
            venv=args.venv,
            topology=args.topology,
            link_prefix_len=args.link_prefix_len,
        )
        cluster.up(images=() if args.no_images else images_mod.IMAGES)
        cluster.record_host_keys(cluster.head)  # as the operator's first, checked ssh to each node would
        print(
            json.dumps(
                {
                    "hosts": cluster.hosts,
                    "ssh_key": str(cluster.ssh_key),
                    "timings_s": {k: round(v, 1) for k, v in cluster.timings.items()},
                },
                indent=2,
            )
        )
        return 0
    if args.cmd == "down":
        start = time.monotonic()
        removed = cleanup_stale(args.name, args.work_root)
        print(
            f"removed {len(removed)} item(s) in {time.monotonic() - start:.1f} s" + "".join(f"\n  {r}" for r in removed)
        )
        return 0
    if args.cmd == "status":
        print(json.dumps(SimCluster.attach(args.name, args.work_root).status(), indent=2))
        return 0
    if args.cmd == "exec":
        cluster = SimCluster.attach(args.name, args.work_root)
        res = cluster.exec(args.node, _strip_dashes(args.argv), timeout=3600)
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        return res.returncode
    if args.cmd == "ssh":
        cluster = SimCluster.attach(args.name, args.work_root)
        words = _strip_dashes(args.argv)
        # One word is a shell command line (as ssh itself takes it); several are quoted one by one.
        res = cluster.ssh(args.from_node, args.to_node, words[0] if len(words) == 1 else words, timeout=3600)
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        return res.returncode
    if args.cmd == "mounts":
        for host, container in container_mounts(args.venv):
            print(f"{host}:{container}:ro")
        return 0
    if args.cmd == "build-images":
        start = time.monotonic()
        built = images_mod.ensure_images(args.venv)
        for tag, img in built.items():
            print(f"{tag} {img.id}")
        if args.out:
            images_mod.save_archive(args.out, built.values())
            print(f"wrote {args.out}")
        print(f"images ready in {time.monotonic() - start:.1f} s")
        return 0
    if args.cmd == "sync-runtime":
        print(f"stand-in installed at {sync_runtime(args.venv)}")
        return 0
    raise AssertionError(args.cmd)


if __name__ == "__main__":
    raise SystemExit(main())
