#!/usr/bin/env bash
# An environment where SGLang's server parser imports on a machine without a GPU, for
# tools/engine_flag_table.py: SGLang itself without its dependencies, the few pure-Python packages
# its parser module imports, and torch/transformers borrowed from the vLLM CPU venv
# (simcluster/install_vllm.sh) through a .pth file. It starts no engine; it only builds the parser.
#
#   bash tools/make_sglang_venv.sh [VENV]   (default /tmp/venv-sglang)
set -Eeuo pipefail

readonly SGLANG_VERSION="0.5.23"
readonly VENV="${1:-/tmp/venv-sglang}"
readonly VLLM_VENV="${SPARKC_SIM_VLLM_VENV:-/opt/sparkc-sim/vllm-venv}"

readonly CHECK='import argparse; from sglang.srt.server_args import ServerArgs; ServerArgs.add_cli_args(argparse.ArgumentParser())'

if [[ -x "$VENV/bin/python3" ]] && "$VENV/bin/python3" -c "$CHECK" 2>/dev/null; then
  echo "SGLang's parser already imports in ${VENV}"
  exit 0
fi
# The vLLM venv's interpreter: its torch is built for that Python, which the .pth below lends to this venv.
"$VLLM_VENV/bin/python3" -m venv "$VENV"
# Exact versions: the few pure-Python packages sglang.srt.server_args imports, as found working with it.
"$VENV/bin/pip" install -q --no-deps "sglang==${SGLANG_VERSION}" orjson==3.13.0 ipython==9.18.1 traitlets==5.16.1
site="$("$VENV/bin/python3" -c 'import site; print(site.getsitepackages()[0])')"
vllm_site="$("$VLLM_VENV/bin/python3" -c 'import site; print(site.getsitepackages()[0])')"
printf '%s\n' "$vllm_site" >"$site/zz-vllm-venv.pth"
"$VENV/bin/python3" -c "$CHECK"
echo "SGLang ${SGLANG_VERSION}'s parser imports in ${VENV}"
