"""Rules about container.mounts and what else the containers see of the host's files. They only report."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, warning
from compiler.resolve.context import Deployment
from compiler.resolve.env import node_envs

# Where each tool keeps its cache when its variable is unset, for root in the container (HOME=/root).
DEFAULT_CACHE_DIRS = (
    ("VLLM_CACHE_ROOT", "/root/.cache/vllm", "vLLM"),
    ("TRITON_CACHE_DIR", "/root/.triton/cache", "Triton"),
    ("FLASHINFER_WORKSPACE_BASE", "/root/.cache/flashinfer", "FlashInfer"),
    ("HF_HOME", "/root/.cache/huggingface", "Hugging Face"),
    ("CUDA_CACHE_PATH", "/root/.nv/ComputeCache", "the CUDA driver"),
    ("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_root", "torch inductor"),
)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def shadowed_cache_mounts(d: Deployment) -> Iterator[Diagnostic]:
    """A mount at a tool's default cache folder is dead when the tool's variable points it elsewhere
    (container.cache sets them all): the tool never writes there, and a restart finds nothing."""
    envs = [{s.name: s for s in env} for env in node_envs(d).values()]
    for i, mount in enumerate(d.spec.container.mounts):
        where = posixpath.normpath(mount.container)
        for variable, default, tool in DEFAULT_CACHE_DIRS:
            if not (_inside(where, default) or _inside(default, where)):
                continue
            setting = next((env[variable] for env in envs if variable in env), None)
            if setting is None or _inside(posixpath.normpath(setting.value), where):
                continue
            fix = (
                "remove the mount: container.cache already keeps it on each node"
                if setting.why.startswith("container.cache")
                else f"mount at {setting.value} instead, or remove the mount"
            )
            yield warning(
                d.spec.container.at("mounts", i, "container"),
                f"{tool} does not use this mount: {variable}={setting.value} ({setting.why}) points it elsewhere; "
                + fix,
            )


def inert_shm_size(d: Deployment) -> Iterator[Diagnostic]:
    """The containers share the host's IPC namespace (--ipc host: NCCL's and the engines' shared memory between
    processes); docker then mounts the host's /dev/shm and ignores --shm-size, so sparkc passes none."""
    container = d.spec.container
    if container.shm_size is not None:
        yield warning(
            container.at("shm_size"),
            "does nothing: sparkc runs every container with --ipc host, so /dev/shm is the host's own and docker "
            "ignores --shm-size; remove it (the host's /dev/shm is half its memory by default: df -h /dev/shm)",
        )


RULES = (shadowed_cache_mounts, inert_shm_size)
