"""The engines' JIT and compile caches, kept on each node's disk per image, so a restart reuses them."""

from __future__ import annotations

import re

from compiler.plan import Setting, Words
from compiler.resolve.context import Deployment

HOST_ROOT = "/var/cache/sparkc"
CONTAINER_DIR = "/var/cache/sparkc"
# Where each library keeps what it compiled, under the one mounted folder. Each reads the variable
# named here (vLLM: VLLM_CACHE_ROOT, its torch.compile artifacts included; FlashInfer appends
# .cache/flashinfer to its base; CUDA_CACHE_PATH keeps the driver's PTX-to-SASS results).
CACHE_VARIABLES = (
    ("VLLM_CACHE_ROOT", "vllm", "vLLM's cache (torch.compile artifacts, CUDA graphs' metadata)"),
    ("TORCHINDUCTOR_CACHE_DIR", "inductor", "torch inductor's compiled graphs"),
    ("TRITON_CACHE_DIR", "triton", "Triton's compiled kernels"),
    ("FLASHINFER_WORKSPACE_BASE", "flashinfer", "FlashInfer's JIT-built kernels"),
    ("CUTE_DSL_CACHE_DIR", "cute-dsl", "CuTe DSL's compiled kernels"),
    ("CUDA_CACHE_PATH", "cuda", "the CUDA driver's PTX JIT cache"),
    ("HF_HOME", "huggingface", "Hugging Face's caches (modules, tokenizers)"),
)


def cache_host_dir(d: Deployment) -> str:
    """The folder on every node, "" when container.cache.enabled is false. One per image by default:
    another build keeps its own kernels (an image ID is only known on the node, its name here)."""
    container = d.spec.container
    if not container.cache:
        return ""
    if container.cache_host:
        return container.cache_host
    return f"{HOST_ROOT}/{re.sub(r'[^A-Za-z0-9._-]', '_', container.image)}"


def cache_mount(d: Deployment) -> tuple[Words, ...]:
    host = cache_host_dir(d)
    return (("-v", f"{host}:{CONTAINER_DIR}"),) if host else ()


def cache_env(d: Deployment) -> tuple[Setting, ...]:
    if not cache_host_dir(d):
        return ()
    source = d.spec.container.source("cache")
    return tuple(
        Setting(name, f"{CONTAINER_DIR}/{sub}", source, f"container.cache: {why}") for name, sub, why in CACHE_VARIABLES
    )
