#!/usr/bin/env bash
# Sets up a Debian 12 machine for dptrain and builds it into build/.
#   tools/setup.sh               packages + Python oracle environment + build
#   tools/setup.sh --no-oracles  packages + build (enough to train; the tests need the oracles)
# Idempotent: installed packages, an existing working oracle environment, fetched headers and
# libraries (cudnn-frontend, MKL) and an existing build are reused. Environment: DPTRAIN_VENV (default /opt/dptrain-venv), DPTRAIN_DEPS
# (default /opt/dptrain-deps: third-party headers the build needs), BUILD_DIR (default build),
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
packages=(build-essential cmake ninja-build pkg-config git python3-pip
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

# 2. NVIDIA's cudnn-frontend (CUDA builds only): the header-only C++ API of cuDNN's graph API that
# runtime/cuda/cudnn_graph.cpp uses, from PyPI's nvidia-cudnn-frontend wheel (its include/ folder),
# pinned by version and sha256, fetched with pip download (not into any environment) and unpacked
# outside the source tree, where CMake looks for it (runtime/CMakeLists.txt). The wheel's name is
# fixed by the platform options, so the same file (and sha256) comes whatever Python runs pip.
fe_version=1.32.0
fe_wheel=nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
fe_sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
fe_dir=${DPTRAIN_DEPS:-/opt/dptrain-deps}/cudnn-frontend-$fe_version
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  say "cudnn-frontend: not needed (no CUDA toolkit: a CPU-only build)"
elif [ -f "$fe_dir/include/cudnn_frontend.h" ] && [ "$(cat "$fe_dir/SHA256" 2>/dev/null)" = "$fe_sha256" ]; then
  say "cudnn-frontend $fe_version: $fe_dir (reused)"
else
  say "fetching cudnn-frontend $fe_version (PyPI nvidia-cudnn-frontend, headers only) into $fe_dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux_2_28_x86_64 --dest "$tmp" "nvidia-cudnn-frontend==$fe_version"
  echo "$fe_sha256  $tmp/$fe_wheel" | sha256sum --check --quiet ||
    { echo "setup.sh: $fe_wheel does not have the pinned sha256 $fe_sha256; not using it" >&2; exit 1; }
  python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' "$tmp/$fe_wheel" "$tmp/x"
  $SUDO rm -rf "$fe_dir"
  $SUDO mkdir -p "$fe_dir"
  $SUDO cp -r "$tmp/x/include" "$fe_dir/"
  echo "$fe_sha256" | $SUDO tee "$fe_dir/SHA256" >/dev/null
  rm -rf "$tmp"
  trap - EXIT
fi

# 2b. Intel oneMKL (optional): train.cpu_gemm = "mkl" (and "auto" where it is present) runs the CPU
# linear layers' GEMMs on MKL's sgemm, which dptrain loads at run time (kernels/cpu/mkl_gemm.h) from
# $DPTRAIN_DEPS/mkl-<version>/lib (the tunable DPTRAIN_MKL_DIR; the build needs no MKL, and without it
# auto runs oneDNN or OpenBLAS). PyPI's mkl wheel (the libraries PyTorch's wheels ship), pinned by
# version and sha256, fetched with pip download like cudnn-frontend; only what cblas_sgemm needs is
# unpacked: the single dynamic library libmkl_rt, the LP64 interface, the GNU threading layer (the
# process's libgomp pool; Intel's libiomp5 is neither fetched nor unpacked), the core and its per-ISA
# kernels. No headers: dptrain declares the few functions it looks up. (About 221 MB to download,
# 450 MB unpacked.)
mkl_version=2026.2.0
mkl_wheel=mkl-2026.2.0-py2.py3-none-manylinux_2_28_x86_64.whl
mkl_sha256=eaab1875ce9f47ab3c66d5632cef06baf768c05781f2f28847bdbc4343500ed7
mkl_dir=${DPTRAIN_DEPS:-/opt/dptrain-deps}/mkl-$mkl_version
if [ "$(uname -m)" != x86_64 ]; then
  say "MKL: not fetched (not an x86-64 machine); train.cpu_gemm = \"auto\" runs oneDNN or OpenBLAS"
elif [ -f "$mkl_dir/lib/libmkl_rt.so.3" ] && [ "$(cat "$mkl_dir/SHA256" 2>/dev/null)" = "$mkl_sha256" ]; then
  say "MKL $mkl_version: $mkl_dir (reused)"
else
  say "fetching MKL $mkl_version (PyPI mkl, the sgemm libraries only) into $mkl_dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --dest "$tmp" \
    "mkl==$mkl_version"
  echo "$mkl_sha256  $tmp/$mkl_wheel" | sha256sum --check --quiet ||
    { echo "setup.sh: $mkl_wheel does not have the pinned sha256 $mkl_sha256; not using it" >&2; exit 1; }
  python3 -c 'import re, sys, zipfile
keep = re.compile(r"/lib/libmkl_(rt|core|intel_lp64|gnu_thread|def|mc3|avx2|avx512|avx10)\.so\.3$")
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if keep.search(n):
        with z.open(n) as f, open(sys.argv[2] + "/" + n.rsplit("/", 1)[1], "wb") as out:
            out.write(f.read())' "$tmp/$mkl_wheel" "$tmp"
  rm -f "$tmp/$mkl_wheel"
  $SUDO rm -rf "$mkl_dir"
  $SUDO mkdir -p "$mkl_dir/lib"
  $SUDO cp "$tmp"/libmkl_*.so.3 "$mkl_dir/lib/"
  echo "$mkl_sha256" | $SUDO tee "$mkl_dir/SHA256" >/dev/null
  rm -rf "$tmp"
  trap - EXIT
fi

# 3. Python oracle environment, outside the repo: only tests use it (dptrain never needs Python).
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

# 4. Configure and build.
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >/dev/null
say "building in $build with $jobs jobs"
cmake --build "$build" -j "$jobs"
say "done: $build/dptrain"
