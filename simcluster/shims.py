"""Files of the small per-image layer: PATH shims into the host venv, and hellohal's entrypoint."""

from __future__ import annotations

_GUARD = """\
#!/bin/sh
# sparkc-sim shim: Python, Ray and the stand-in engine live in the host venv, which the container
# must mount read-only at the same path (simcluster.container_mounts() lists the mounts).
if [ ! -x {venv}/bin/python3 ]; then
  echo "sparkc-sim: {venv} (and {home}) must be mounted read-only into this container" >&2
  exit 127
fi
"""

_PYTHON = 'exec {venv}/bin/python3 "$@"\n'
_VLLM = 'exec {venv}/bin/python3 -m sparkc_standin vllm "$@"\n'
_RAY = 'exec {venv}/bin/ray "$@"\n'
_TRTLLM_SERVE = 'exec {venv}/bin/python3 -m sparkc_standin trtllm-serve "$@"\n'
_TRTLLM_LAUNCH = 'exec {venv}/bin/python3 -m sparkc_standin trtllm-llmapi-launch "$@"\n'

# Mirrors hellohal2064/vllm-qwen3.5-gb10: builds its own `vllm serve` from the environment and
# appends the command words, silently dropping the ones it sets itself (seed 004: --port ignored).
HELLOHAL_ENTRYPOINT = r"""#!/bin/bash
set -euo pipefail

MODEL_PATH="${MODEL_PATH:-/models/model}"
HOST="${HOST:-0.0.0.0}"
PORT="${PORT:-8000}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-8192}"
GPU_MEMORY_UTIL="${GPU_MEMORY_UTIL:-0.85}"

echo "=========================================="
echo " vLLM Qwen3.5 for GB10 (sparkc-sim copy)"
echo "  MODEL_PATH=${MODEL_PATH}"
echo "  HOST=${HOST}"
echo "  PORT=${PORT}"
echo "  MAX_MODEL_LEN=${MAX_MODEL_LEN}"
echo "  GPU_MEMORY_UTIL=${GPU_MEMORY_UTIL}"
echo "=========================================="

words=("$@")
# A leading `vllm serve [MODEL]` is dropped: the entrypoint supplies its own.
if ((${#words[@]} >= 2)) && [[ "${words[0]}" == vllm && "${words[1]}" == serve ]]; then
  if ((${#words[@]} >= 3)) && [[ "${words[2]}" != -* ]]; then
    words=("${words[@]:3}")
  else
    words=("${words[@]:2}")
  fi
fi

extra=()
i=0
while ((i < ${#words[@]})); do
  case "${words[i]}" in
    --port | --host | --max-model-len | --gpu-memory-utilization) i=$((i + 2)) ;;
    --port=* | --host=* | --max-model-len=* | --gpu-memory-utilization=*) i=$((i + 1)) ;;
    *) extra+=("${words[i]}"); i=$((i + 1)) ;;
  esac
done

exec vllm serve "$MODEL_PATH" --host "$HOST" --port "$PORT" \
  --max-model-len "$MAX_MODEL_LEN" --gpu-memory-utilization "$GPU_MEMORY_UTIL" "${extra[@]}"
"""

VARIANTS = ("vllm", "vllm-noray", "hellohal", "trtllm")


def variant_files(variant: str, venv: str, python_home: str) -> dict[str, tuple[int, str]]:
    """{path inside the image (no leading slash): (mode, content)} for one image variant."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown image variant {variant!r}; known: {', '.join(VARIANTS)}")
    guard = _GUARD.format(venv=venv, home=python_home)
    files: dict[str, tuple[int, str]] = {
        "usr/local/bin/python3": (0o755, guard + _PYTHON.format(venv=venv)),
        "usr/local/bin/python": (0o755, guard + _PYTHON.format(venv=venv)),
        "usr/local/bin/vllm": (0o755, guard + _VLLM.format(venv=venv)),
        # The stand-in reads this to behave like an image without Ray (DOMAIN: F11).
        "etc/sparkc-sim/image": (0o644, variant + "\n"),
    }
    if variant == "trtllm":  # like NGC's TensorRT-LLM image: no vLLM, no Ray; trtllm-serve under mpirun
        del files["usr/local/bin/vllm"]
        files["usr/local/bin/trtllm-serve"] = (0o755, guard + _TRTLLM_SERVE.format(venv=venv))
        files["usr/local/bin/trtllm-llmapi-launch"] = (0o755, guard + _TRTLLM_LAUNCH.format(venv=venv))
        return files
    if variant != "vllm-noray":
        files["usr/local/bin/ray"] = (0o755, guard + _RAY.format(venv=venv))
    if variant == "hellohal":
        files["app/entrypoint.sh"] = (0o755, HELLOHAL_ENTRYPOINT)
    return files
