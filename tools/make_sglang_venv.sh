#!/usr/bin/env bash
# An environment where SGLang's server parser imports on a machine without a GPU, for
# tools/engine_flag_table.py: SGLang itself without its dependencies, the few pure-Python packages
# its parser module imports, and torch/transformers borrowed from the vLLM CPU venv
# (simcluster/install_vllm.sh) through a .pth file. It starts no engine; it only builds the parser.
#
#   bash tools/make_sglang_venv.sh [VENV [VERSION]]   (default /tmp/venv-sglang, SGLang 0.5.23)
#   bash tools/make_sglang_venv.sh /tmp/venv-sglang-0.5.9 0.5.9   (an older release's table)
set -Eeuo pipefail

readonly VENV="${1:-/tmp/venv-sglang}"
readonly SGLANG_VERSION="${2:-0.5.23}"
readonly VLLM_VENV="${SPARKC_SIM_VLLM_VENV:-/opt/sparkc-sim/vllm-venv}"

readonly CHECK='import argparse; from sglang.srt.server_args import ServerArgs; ServerArgs.add_cli_args(argparse.ArgumentParser())'

if [[ -x "$VENV/bin/python3" ]] && "$VENV/bin/python3" -c "$CHECK" 2>/dev/null \
  && [[ "$("$VENV/bin/python3" -c 'import sglang; print(sglang.__version__)')" == "$SGLANG_VERSION" ]]; then
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
if ! "$VENV/bin/python3" -c "$CHECK"; then
  echo "SGLang ${SGLANG_VERSION} is in ${VENV}, but its parser's module imports a package the venv lacks (above)." >&2
  echo "Where its parser does not use it (torchvision, from 0.5.4 on), give tools/engine_flag_table.py --stub NAME." >&2
  exit 1
fi
echo "SGLang ${SGLANG_VERSION}'s parser imports in ${VENV}"
