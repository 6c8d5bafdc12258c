"""Simulated multi-node GPU cluster on one machine, for running sparkc's generated scripts for real.

Nodes are Linux namespaces (net, pid, mount, uts, ipc) joined by two bridged networks
(management and fabric); each runs its own sshd and dockerd. See README.md.
"""

from __future__ import annotations

from .cleanup import cleanup_stale
from .cluster import PortBlocker, SimCluster, preflight
from .images import HELLOHAL_IMAGE, IMAGES, NORAY_IMAGE, TRTLLM_IMAGE, TRTLLM_SSHD_IMAGE, VLLM_IMAGE, ensure_images
from .nodes import ClusterUnavailable, Node, NodeSpec
from .runtime import VENV, container_mounts, docker_mount_args, sync_runtime

__all__ = [
    "HELLOHAL_IMAGE",
    "IMAGES",
    "NORAY_IMAGE",
    "TRTLLM_IMAGE",
    "TRTLLM_SSHD_IMAGE",
    "VENV",
    "VLLM_IMAGE",
    "ClusterUnavailable",
    "Node",
    "NodeSpec",
    "PortBlocker",
    "SimCluster",
    "cleanup_stale",
    "container_mounts",
    "docker_mount_args",
    "ensure_images",
    "preflight",
    "sync_runtime",
]
