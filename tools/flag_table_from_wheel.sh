#!/usr/bin/env bash
# The flag table of an engine release other than the one installed for the tests, from that release's
# own wheel on PyPI: its Python files (no compiled kernels) are put ahead of the installed engine and
# tools/engine_flag_table.py imports its parser there, on CPU, with the installed engine's dependencies.
# A dependency that release's modules import but the environment lacks is stood in for (STUBS).
#
#   bash tools/flag_table_from_wheel.sh vllm 0.11.2 [STUBS]   (STUBS: comma-separated, such as diskcache)
set -Eeuo pipefail

readonly ENGINE="$1" VERSION="$2" STUBS="${3:-}"
case "$ENGINE" in
  vllm) readonly PYTHON="${SPARKC_SIM_VLLM_VENV:-/opt/sparkc-sim/vllm-venv}/bin/python3" ;;
  sglang) readonly PYTHON="${SPARKC_SGLANG_VENV:-/opt/sparkc-sim/sglang-venv}/bin/python3" ;;
  *) echo "usage: $0 vllm|sglang VERSION [STUBS]" >&2 && exit 2 ;;
esac

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pip download -q --no-deps -d "$work" "${ENGINE}==${VERSION}"
wheel="$(find "$work" -maxdepth 1 -name '*.whl' -print -quit)"
unzip -q "$wheel" -d "$work/src" -x '*.so'
# Without the wheel's metadata the installed CPU build's is found: vLLM picks its CPU platform from it.
rm -rf "$work"/src/*.dist-info
VLLM_TARGET_DEVICE=cpu PYTHONPATH="$work/src" "$PYTHON" tools/engine_flag_table.py "$ENGINE" --stub "$STUBS" \
  --made "the parser of ${wheel##*/} (PyPI) imported on CPU by tools/flag_table_from_wheel.sh"
