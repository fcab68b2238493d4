#!/usr/bin/env bash
# Sets up a Debian 12 machine for dptrain and builds it into build/.
#   tools/setup.sh               packages + Python oracle environment + build
#   tools/setup.sh --no-oracles  packages + build (enough to train; the tests need the oracles)
# Idempotent: installed packages, an existing working oracle environment and an existing build
# are reused. Environment: DPTRAIN_VENV (default /opt/dptrain-venv), BUILD_DIR (default build),
# CUDA_ARCH (default 90), JOBS (default: all cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
oracles=1
for a in "$@"; do
  case "$a" in
    --no-oracles) oracles=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (use --no-oracles or --help)" >&2; exit 2 ;;
  esac
done

say() { printf '[setup] %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# 1. Debian packages (CUDA, cuDNN and NCCL come from /usr/local/cuda when present).
packages=(build-essential cmake ninja-build pkg-config git
  libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libgtest-dev libgmock-dev libopenblas-openmp-dev libdnnl-dev linux-perf dataset-fashion-mnist python3 python3-venv libpmix2 libpmi2-0
  slurm-wlm slurmctld slurmd slurm-client slurm-wlm-basic-plugins libpmi2-0-dev munge libmunge2 libmunge-dev libpmix-dev
  libboost-context-dev libjpeg62-turbo-dev libspng-dev
  libssl-dev clang-14 libclang-rt-14-dev libomp-14-dev llvm-14
  iproute2 util-linux)  # ip netns, nsenter, unshare: the multi-host Slurm fixture (tools/slurm/netns.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages: all present"
fi

# 2. Python oracle environment, outside the repo: only tests use it (dptrain never needs Python).
if [ "$oracles" = 1 ]; then
  venv=${DPTRAIN_VENV:-/opt/dptrain-venv}
  check='import torch, torchvision, numpy, safetensors, tensorboard, PIL'
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    say "oracle environment: $venv (reused)"
  else
    say "creating the oracle environment in $venv (torch, torchvision, numpy, safetensors, tensorboard, pillow)"
    t0=$(date +%s)
    py=python3
    if command -v /usr/bin/python3 >/dev/null; then py=/usr/bin/python3; fi
    $SUDO mkdir -p "$(dirname "$venv")"
    $py -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q torch torchvision numpy safetensors tensorboard pillow
    "$venv/bin/python" -c "$check"
    say "oracle environment ready in $(( $(date +%s) - t0 )) s"
  fi
  # Optional: Hugging Face transformers, pinned, for tests/oracle/test_gpt_torch.py's GPT-2 checkpoint
  # import (that part is skipped, saying so, without it); a failed install does not stop the setup.
  if ! "$venv/bin/python" -c 'import transformers' 2>/dev/null; then
    "$venv/bin/pip" install -q 'transformers==5.24.0' || say "transformers not installed: the Hugging Face GPT-2 oracle will be skipped"
  fi
fi

# 3. Configure and build.
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >/dev/null
say "building in $build with $jobs jobs"
cmake --build "$build" -j "$jobs"
say "done: $build/dptrain"
