#!/usr/bin/env bash
# pack.sh: prepares, on the build machine, what tools/gpu/run_all.sh needs on the lent GPU
# machine, in the git-ignored folder .gpu-carry/ (the device tool carries it with the tree).
#
#   tools/gpu/pack.sh [BUILD_DIR]        (default: build; a CUDA build for sm_90)
#
# Build first (here, not on the device: its time is short), e.g.
#   cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C build dptrain \
#     test_runtime test_kernels test_models test_collectives test_launch diffckpt
#
# .gpu-carry/ then holds
#   bundle.tar.xz   build/dptrain and build/tests/test_* (stripped copies; those of TESTS that are
#                   built), build/MANIFEST (commit, paths, sizes), lib/ (the shared libraries ldd
#                   shows that the GPU machine lacks: spdlog, fmt, OpenBLAS, gfortran, gomp, z, ...;
#                   stripped) and lib-fallback/ (libstdc++, libgcc_s: used there only if its own
#                   are too old). Left out, because the GPU machine has them: the CUDA driver,
#                   the CUDA runtime, cuBLAS(Lt), cuDNN and NCCL (PyTorch's nvidia-* packages),
#                   and glibc (libc, libm, libdl, libpthread, librt, ld-linux).
#   fashion-mnist/  the four Fashion-MNIST .gz files (~30 MB, already compressed) for run_all.sh's
#                   fmnist step; FMNIST_DIR=none leaves them out (the step then says "skipped")
#   MANIFEST.txt    the same manifest, readable without unpacking
#   cpu_top1        the final top-1 of a CPU run of models/fmnist_cnn.cfg, when CPU_RUN (default
#                   runs/fmnist_cnn, what `build/dptrain models/fmnist_cnn.cfg` writes) has one:
#                   run_all.sh compares the GPU run with it unless --cpu-top1 gives another
# and pack.sh prints the sizes, the `carry` list and the command for the device tool.
# The working tree plus the carried folder must stay under 64 MiB: pack.sh fails above LIMIT_MIB.
#
# Environment: CARRY_DIR (default .gpu-carry; a git-ignored folder name in the repo root), TESTS (default "test_runtime
# test_kernels test_models test_collectives test_launch"), EXTRA_BINS (more build/ programs; default "diffckpt"),
# FMNIST_DIR (default /usr/share/datasets/fashion-mnist; "none" to leave out), CPU_RUN (default
# runs/fmnist_cnn; "none" to leave out), LIMIT_MIB (64),
# XZ_OPT (default "-9 -T2": -9's 64 MiB dictionary spans whole binaries, and the test binaries share
# most of their code with each other and dptrain, which -6's 8 MiB window cannot see: on 2026-12-01 the
# bundle was 21.1 MiB with -9 against 27.5 with -6, for about 2 min of one core instead of 40 s of two).
# Exit status: 0 packed and within the limit, 1 a missing library or over the limit, 2 usage.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
BUILD=${1:-build}
CARRY_DIR=${CARRY_DIR:-.gpu-carry}
TESTS=${TESTS:-test_runtime test_kernels test_models test_collectives test_launch}
EXTRA_BINS=${EXTRA_BINS:-diffckpt}
FMNIST_DIR=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
CPU_RUN=${CPU_RUN:-runs/fmnist_cnn}
LIMIT_MIB=${LIMIT_MIB:-64}
export XZ_OPT=${XZ_OPT:--9 -T2}

die() { echo "pack: $*" >&2; exit "${2:-2}"; }
say() { echo "[pack] $*"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

[[ -d $BUILD ]] || die "no build folder '$BUILD' (see the header: build with -DCMAKE_CUDA_ARCHITECTURES=90 first)"
BUILD=$(cd "$BUILD" && pwd)
cache=$BUILD/CMakeCache.txt
[[ -f $cache ]] || die "$BUILD has no CMakeCache.txt: not a CMake build folder"
[[ -x $BUILD/dptrain ]] || die "$BUILD/dptrain is not built (ninja -C $BUILD dptrain)"
# grep without -q reads all of ldd's output: with -q it may stop early, ldd then dies of SIGPIPE and
# pipefail turns the match into a failure (seen once dptrain linked a few more libraries).
ldd "$BUILD/dptrain" | grep 'libcudart' >/dev/null ||
  die "$BUILD/dptrain does not link the CUDA runtime: a CPU-only build (configure where /usr/local/cuda is)"
# The architectures: the cache's value, else the project's default (90, CMakeLists.txt).
archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$cache")
archs=${archs:-90}
[[ ";$archs;" == *";90;"* || ";$archs;" == *";90-real;"* || ";$archs;" == *";90a"* ]] ||
  die "$BUILD builds for CUDA architectures '$archs', not 90 (H100/H200): -DCMAKE_CUDA_ARCHITECTURES=90"
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -n 1)
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:[A-Z]*=//p' "$cache")
[[ $CARRY_DIR != /* ]] || die "CARRY_DIR must be a folder inside the repo (relative), not '$CARRY_DIR'"
[[ $CARRY_DIR =~ ^[A-Za-z0-9._-]+$ && $CARRY_DIR != . && $CARRY_DIR != .. ]] || die "CARRY_DIR '$CARRY_DIR': one plain folder name"
git check-ignore -q "$CARRY_DIR/" || die "$CARRY_DIR is not ignored by git (.gitignore ignores /.gpu-carry*/): it would travel twice"

# The programs.
bins=("$BUILD/dptrain")
for t in $TESTS; do
  if [[ -x $BUILD/tests/$t ]]; then bins+=("$BUILD/tests/$t"); else say "note: $BUILD/tests/$t is not built: not carried"; fi
done
for e in $EXTRA_BINS; do
  [[ -x $BUILD/$e ]] || die "EXTRA_BINS: $BUILD/$e is not built"
  bins+=("$BUILD/$e")
done

stage=$(mktemp -d /tmp/dptrain-pack.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/tests" "$stage/lib" "$stage/lib-fallback"
for b in "${bins[@]}"; do
  rel=${b#"$BUILD"/}
  cp "$b" "$stage/build/$rel"
  strip --strip-unneeded "$stage/build/$rel" 2>/dev/null || say "note: could not strip $rel"
done

# The libraries: every resolved ldd line, sorted into carried / fallback / left out.
declare -A carried=() fallback=() left_out=()
missing=()
for b in "${bins[@]}"; do
  while read -r line; do
    if [[ $line == *"=> not found"* ]]; then missing+=("$(basename "$b"): ${line%% *}"); continue; fi
    [[ $line == *" => /"* ]] || continue  # vdso, the loader's own line
    name=${line%% =>*}
    path=${line#*=> }
    path=${path%% (*}
    case $name in
      libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libcudnn*.so* | libnccl.so* | libnvrtc*.so* | \
        libnvJitLink.so* | libcufft*.so* | libcurand.so* | libcusparse*.so* | libcusolver*.so* | libnvToolsExt.so* | \
        libnvtx*.so* | libcupti.so*)
        left_out[$name]="$path (CUDA: from the GPU machine)" ;;
      libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.* | ld-linux*)
        left_out[$name]="$path (glibc: the GPU machine's own)" ;;
      libstdc++.so.* | libgcc_s.so.*)
        fallback[$name]=$path ;;
      *)
        case $path in
          /usr/local/cuda*) left_out[$name]="$path (CUDA toolkit)" ;;
          *) carried[$name]=$path ;;
        esac ;;
    esac
  done < <(ldd "$b")
done
((${#missing[@]} == 0)) || die "libraries not found by ldd here: ${missing[*]}" 1
for name in "${!carried[@]}"; do
  cp -L "${carried[$name]}" "$stage/lib/$name"
  strip --strip-unneeded "$stage/lib/$name" 2>/dev/null || true
done
for name in "${!fallback[@]}"; do
  cp -L "${fallback[$name]}" "$stage/lib-fallback/$name"
  strip --strip-unneeded "$stage/lib-fallback/$name" 2>/dev/null || true
done

# The manifest: what was packed, from where (run_all.sh links source_dir and build_dir, compiled
# into the tests, to the checkout and the unpacked build there).
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+uncommitted"
{
  echo "packed=$(date -u '+%Y-%m-%dT%H:%M:%SZ') on $(hostname)"
  echo "commit=$commit"
  echo "source_dir=$source_dir"
  echo "build_dir=$BUILD"
  echo "cuda_architectures=$archs"
  echo "nvcc=${nvcc:-?} $("${nvcc:-nvcc}" --version 2>/dev/null | tail -n 1)"
  # The library versions the build was compiled against (the GPU machine's must not be older).
  inc=$(dirname "$(dirname "${nvcc:-/usr/local/cuda/bin/nvcc}")")/include
  hdr() { awk -v keys="$2" 'BEGIN { n = split(keys, k, " ") } $1 == "#define" { v[$2] = $3 }
    END { s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? "." : "") v[k[i]]; print s }' "$inc/$1" 2>/dev/null; }
  echo "built_against=cudart $(hdr cuda_runtime_api.h CUDART_VERSION) cuBLAS $(hdr cublas_api.h 'CUBLAS_VER_MAJOR CUBLAS_VER_MINOR CUBLAS_VER_PATCH') cuDNN $(hdr cudnn_version.h 'CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL') NCCL $(hdr nccl.h 'NCCL_MAJOR NCCL_MINOR NCCL_PATCH')"
  (cd "$stage" && find build lib lib-fallback -type f -printf 'file=%p %s\n' | sort)
  for name in $(printf '%s\n' "${!left_out[@]}" | sort); do echo "left_out=$name ${left_out[$name]}"; done
} >"$stage/build/MANIFEST"

# The carried folder.
rm -rf "${CARRY_DIR:?}"
mkdir -p "$CARRY_DIR"
say "compressing (xz $XZ_OPT) ..."
tar -C "$stage" -cJf "$CARRY_DIR/bundle.tar.xz" build lib lib-fallback
cp "$stage/build/MANIFEST" "$CARRY_DIR/MANIFEST.txt"
if [[ $FMNIST_DIR != none ]]; then
  mkdir -p "$CARRY_DIR/fashion-mnist"
  for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    [[ -f $FMNIST_DIR/$f ]] || die "FMNIST_DIR: no $FMNIST_DIR/$f (apt-get install dataset-fashion-mnist, or FMNIST_DIR=none)"
    cp "$FMNIST_DIR/$f" "$CARRY_DIR/fashion-mnist/"
  done
fi

# The CPU reference: the last eval line's top-1 of a finished CPU run of the unmodified cfg.
cpu_top1=""
if [[ $CPU_RUN != none && -f $CPU_RUN/metrics.jsonl ]]; then
  cpu_top1=$(python3 - "$CPU_RUN" <<'PY'
import json, os, re, sys
run = sys.argv[1]
top1 = None
for line in open(os.path.join(run, "metrics.jsonl")):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if d.get("split") == "eval" and "top1" in d:
        top1 = d["top1"] if d.get("epoch") == 3 else None  # the end of the cfg's 3 epochs
cfg = open(os.path.join(run, "config.toml")).read() if os.path.exists(os.path.join(run, "config.toml")) else ""
# Only a CPU run of models/fmnist_cnn.cfg as it is: the cnn preset, 3 epochs, batch 128, fp32.
want = [r"preset = [\"']cnn[\"']", r"epochs = 3\b", r"batch_size = 128\b", r"precision = [\"']fp32[\"']",
        r"train_limit = 0\b"]
if (top1 is not None and all(re.search(w, cfg) for w in want)
        and not re.search(r"device = [\"']cuda[\"']", cfg)):
    print(top1)
PY
  )
  if [[ -n $cpu_top1 ]]; then
    echo "$cpu_top1" >"$CARRY_DIR/cpu_top1"
    echo "cpu_top1=$cpu_top1 from $(cd "$CPU_RUN" && pwd)/metrics.jsonl" >>"$CARRY_DIR/MANIFEST.txt"
  else
    say "note: $CPU_RUN is not a finished CPU run of models/fmnist_cnn.cfg as it is: no CPU reference packed"
  fi
fi

# Sizes.
echo
printf '%-34s %12s %12s\n' "packed (stripped)" "bytes" ""
while read -r f s; do printf '  %-32s %12s %12s\n' "$f" "$s" "$(mib "$s")"; done \
  < <(cd "$stage" && find build lib lib-fallback -type f -printf '%p %s\n' | sort)
raw=$(cd "$stage" && find build lib lib-fallback -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
carry=$(du -sb "$CARRY_DIR" | cut -f1)
tree=$(git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
# The device tool also sends shared/ when the checkout has one, ignored or not.
if [[ -d shared ]] && git check-ignore -q shared/; then tree=$((tree + $(du -sb shared | cut -f1))); fi
bundle=$(stat -c %s "$CARRY_DIR/bundle.tar.xz")
echo
say "bundle.tar.xz: $(mib "$bundle") (from $(mib "$raw") uncompressed)"
[[ -d $CARRY_DIR/fashion-mnist ]] && say "fashion-mnist: $(mib "$(du -sb "$CARRY_DIR/fashion-mnist" | cut -f1)")"
say "carried folder $CARRY_DIR: $(mib "$carry"); working tree (tracked + untracked, not ignored): $(mib "$tree")"
total=$((carry + tree))
say "total that travels: $(mib "$total") of $LIMIT_MIB MiB"
say "left out (the GPU machine's own): $(printf '%s\n' "${!left_out[@]}" | sort | tr '\n' ' ')"
if ((total > LIMIT_MIB * 1048576)); then
  die "over the ${LIMIT_MIB} MiB the device tool carries: leave out the data (FMNIST_DIR=none) or tests (TESTS=...)" 1
fi
cat <<EOF

Device tool call (one command; about 9 minutes; results in \$OUT/summary.txt and \$OUT/logs.tar.gz):
  carry:     ["$CARRY_DIR"]$([[ $CARRY_DIR != .gpu-carry ]] && echo "   (and CARRY=$CARRY_DIR before bash in the command)")
  timeout_s: 600
  command:   bash tools/gpu/run_all.sh$([[ -n $cpu_top1 ]] && echo "      (CPU top-1 $cpu_top1 packed)" || echo " --cpu-top1 <CPU top-1 of models/fmnist_cnn.cfg, e.g. 0.9123>")
With benchmark variants (docs/gpu-runbook.md, section 6):
  command:   VARIANTS='graph:train.cudnn_api=graph' bash tools/gpu/run_all.sh
A second, short look (gtest, fmnist, profile):
  command:   bash tools/gpu/run_all.sh --only gtest,fmnist,profile --budget 270      (timeout_s 310)
Split over two calls when one is not enough:
  command:   bash tools/gpu/run_all.sh --skip bench,sanitizer,kernels
  command:   bash tools/gpu/run_all.sh --only bench,sanitizer,kernels --budget 570
EOF
