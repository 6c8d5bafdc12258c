#!/usr/bin/env bash
# Installs what the simulated cluster (simcluster) needs on a fresh Debian 12 machine, as root.
# Idempotent: every step checks first and is skipped when already done. Prints a timing per step.
#
#   bash simcluster/install.sh            # apt + venv + stand-in + test images
#   bash simcluster/install.sh --no-images
#
# Env: SPARKC_SIM_ROOT (default /opt/sparkc-sim; the venv is $SPARKC_SIM_ROOT/venv),
#      SPARKC_SIM_CACHE (default /var/cache/sparkc-sim; image cache).
set -Eeuo pipefail

readonly SIM_ROOT="${SPARKC_SIM_ROOT:-/opt/sparkc-sim}"
readonly VENV="${SIM_ROOT}/venv"
# LiteLLM's proxy for the gateway's test image, pinned as compiler/resolve/gateway.py pins its image.
readonly LITELLM_VENV="${SIM_ROOT}/litellm-venv"
readonly LITELLM_VERSION="1.89.4"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
readonly APT_PACKAGES=(
  slurm-wlm # compile --target slurm's job runs under a private slurmctld and slurmds
  munge
  openssh-server
  openssh-client
  docker.io
  iproute2
  iptables
  debootstrap
  util-linux
  procps
  # login shells the generated scripts must work under on a worker (tests/fake_cluster/test_hardening.py)
  dash
  zsh
  busybox
  # GBK, Big5 and Shift_JIS character maps: the security corpus runs the scripts under those locales
  locales
  curl
  rsync
  ca-certificates
  # the runtime's own tests (runtime/tests/*.bats, run by tests/unit/test_runtime_bats.py)
  bats
  # systemd-analyze verify checks the generated unit (tests/fake_cluster/test_service.py); systemd need not run
  systemd
  # a ring's preflight pings the node before each node over its cable, as on DGX OS
  iputils-ping
  # Open MPI's mpirun: the TensorRT-LLM stand-in's ranks (simcluster/tests/test_trtllm_standin.py)
  openmpi-bin
)
readonly PIP_PACKAGES=(
  "ray==2.60.*"
  "torch==2.13.0"
  numpy
)

build_images=1
for arg in "$@"; do
  case "$arg" in
    --no-images) build_images=0 ;;
    *) echo "install.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

T0=$(date +%s.%N)
step_start() { STEP_NAME="$1"; STEP_T0=$(date +%s.%N); echo "==> ${STEP_NAME}"; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }
step_end() { echo "    ${STEP_NAME}: $(elapsed "$STEP_T0") s"; }

if [[ $(id -u) -ne 0 ]]; then
  echo "install.sh: must run as root (it installs Debian packages and creates ${SIM_ROOT})" >&2
  exit 1
fi

install_apt() {
  step_start "apt packages"
  local missing=()
  local pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    echo "    all present"
  else
    echo "    installing: ${missing[*]}"
    # Keep the packages' services (sshd, dockerd, containerd) from starting on the host itself:
    # the cluster starts its own, one per node, inside namespaces.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT  # also when apt fails: never leave services blocked
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  step_end
}

install_venv() {
  step_start "python venv ${VENV}"
  local py
  # The machine's interpreter, also when a virtual environment is active (.ci/run runs this from one).
  py="$(python3 -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')"
  if ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    rm -rf "$VENV"
    mkdir -p "$SIM_ROOT"
    # The venv and the interpreter it points at are bind-mounted read-only into the containers at
    # the same paths, so the venv must be a plain one made from the machine's python3.
    "$py" -m venv "$VENV"
  fi
  if "$VENV/bin/python" - <<'PY' 2>/dev/null
import numpy, ray, torch
assert ray.__version__.startswith("2.60."), ray.__version__
assert torch.__version__.startswith("2.13.0"), torch.__version__
PY
  then
    echo "    ray, torch, numpy present"
  else
    # The machine's pip config names local indexes that may be absent; drop pip's warnings about them.
    "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" 2>&1 |
      { grep -v 'is ignored: it is neither a file nor a directory' || true; }
  fi
  "$VENV/bin/python" -c 'import ray, torch; print("    ray", ray.__version__, "torch", torch.__version__)'
  step_end
}

install_litellm() {
  step_start "LiteLLM ${LITELLM_VERSION} venv ${LITELLM_VENV}"
  local py
  py="$(python3 -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')"
  local check="import importlib.metadata as m; assert m.version('litellm') == '${LITELLM_VERSION}'"
  if "$LITELLM_VENV/bin/python" -c "$check" 2>/dev/null && [[ -x $LITELLM_VENV/bin/litellm ]]; then
    echo "    litellm ${LITELLM_VERSION} present"
  else
    # Its own venv: the proxy's dependencies (fastapi, pydantic, openai) stay apart from Ray's and torch's.
    # Made from the machine's python3, as the venv above, for the same read-only mounts into containers.
    rm -rf "$LITELLM_VENV"
    mkdir -p "$SIM_ROOT"
    "$py" -m venv "$LITELLM_VENV"
    "$LITELLM_VENV/bin/pip" install -q --disable-pip-version-check "litellm[proxy]==${LITELLM_VERSION}" 2>&1 |
      { grep -v 'is ignored: it is neither a file nor a directory' || true; }
    "$LITELLM_VENV/bin/python" -c "$check"
  fi
  step_end
}

install_runtime() {
  step_start "stand-in engine into the venv"
  (cd "$REPO_ROOT" && python3 -m simcluster sync-runtime --venv "$VENV")
  step_end
}

install_images() {
  step_start "test images (cached)"
  (cd "$REPO_ROOT" && python3 -m simcluster build-images --venv "$VENV")
  step_end
}

install_apt
install_venv
install_litellm
install_runtime
if ((build_images)); then install_images; fi
echo "install.sh: done in $(elapsed "$T0") s"
