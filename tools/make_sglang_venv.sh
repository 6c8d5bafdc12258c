#!/usr/bin/env bash
# An environment where SGLang's server parser imports on a machine without a GPU, for
# tools/engine_flag_table.py: SGLang itself without its dependencies, the few pure-Python packages
# its parser module imports, and torch/transformers borrowed from the vLLM CPU venv
# (tests/simcluster/install_vllm.sh) through a .pth file. It starts no engine; it only builds the parser.
#
#   bash tools/make_sglang_venv.sh [VENV]   (default /tmp/venv-sglang)
set -Eeuo pipefail

readonly SGLANG_VERSION="0.5.23"
readonly VENV="${1:-/tmp/venv-sglang}"
readonly VLLM_VENV="${SPARKC_SIM_VLLM_VENV:-/opt/sparkc-sim/vllm-venv}"

python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --no-deps "sglang==${SGLANG_VERSION}" orjson IPython traitlets
site="$("$VENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
vllm_site="$("$VLLM_VENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
printf '%s\n' "$vllm_site" >"$site/zz-vllm-venv.pth"
"$VENV/bin/python" -c 'import argparse; from sglang.srt.server_args import ServerArgs; ServerArgs.add_cli_args(argparse.ArgumentParser())'
echo "SGLang ${SGLANG_VERSION}'s parser imports in ${VENV}"
