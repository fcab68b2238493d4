#!/usr/bin/env bash
# Integration test: the bootstraps and the ring backend under a real Slurm (tools/slurm/fixture.sh:
# munged, slurmctld, two slurmd "nodes" n1 n2 on this host) and under the torchrun-style env
# variables. Runs BUILD_DIR/dptrain_probe as
#   srun --mpi=pmix -N2 -n4      expects kind=pmix
#   srun --mpi=pmi2 -N2 -n4      expects kind=pmi2
#   srun --mpi=none -N2 -n4      expects kind=slurm (Slurm env bootstrap; MASTER_ADDR=127.0.0.1
#                                because the node names n1 n2 do not resolve)
#   4 local processes with RANK WORLD_SIZE MASTER_ADDR MASTER_PORT LOCAL_RANK LOCAL_WORLD_SIZE
#   GROUP_RANK, as two "nodes" of two and as one node of four: expects kind=env
# and checks every rank's line: 4 lines, ranks 0..3 once each, size 4, local ranks 0,1,0,1, node
# ids 0,0,1,1 (0,1,2,3 and 0,0,0,0 for the one-node env case), allreduce (sum of rank+1) = 10.
# srun can exit 0 after a failed launch, so the output decides, not the exit status.
# Needs root and the Slurm, munge and PMIx packages (tools/setup.sh installs them); FAILS, not
# skips, without them. Usage: bash tests/integration/test_slurm_probe.sh BUILD_DIR (from the repo
# root, as ctest runs it).
set -uo pipefail

build=${1:?usage: test_slurm_probe.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
probe=$(cd "$build" && pwd)/dptrain_probe
fixture=$repo/tools/slurm/fixture.sh
t_start=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/slurm_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm_env.sh"

# --- prerequisites: a clear failure, never a skip
[ -x "$probe" ] || fail "$probe not built (ninja -C $build dptrain_probe)"
require_slurm

# --- a clean environment: nothing from an enclosing Slurm job or launcher
clean_launch_env

# --- the cluster; stopped on every exit path
work=$(mktemp -d /tmp/dptrain-slurm-test.XXXXXX)
cleanup() {
  "$fixture" stop "$work" || echo "warning: fixture stop failed for $work" >&2
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# A port block per test run, so two runs side by side (ctest -j, two build dirs) do not collide.
# Likewise the first job id: the Slurm env bootstrap derives its store port from the job id.
export SLURM_FIXTURE_PORT=${SLURM_FIXTURE_PORT:-$((17000 + ($$ % 200) * 10))}
export SLURM_FIXTURE_FIRST_JOB_ID=${SLURM_FIXTURE_FIRST_JOB_ID:-$((100 + ($$ % 300) * 3))}
exports=$("$fixture" start "$work") || fail "the Slurm fixture did not start (see above)"
eval "$exports"
[ -n "${SLURM_CONF:-}" ] || fail "fixture printed no SLURM_CONF ('$exports')"
echo "cluster up in $((SECONDS - t_start)) s: SLURM_CONF=$SLURM_CONF"

# check_lines KIND PER_NODE FILE: every rank's line as expected (PER_NODE ranks on each node, in
# rank order).
check_lines() {
  local kind=$1 per=$2 file=$3 n errs=0 line r
  local -A seen=()
  n=$(grep -c '^probe ' "$file")
  if [ "$n" -ne 4 ]; then
    echo "  expected 4 probe lines, got $n" >&2
    errs=1
  fi
  while IFS= read -r line; do
    if ! [[ $line =~ ^probe\ kind=([a-z0-9]+)\ rank=([0-9]+)\ size=([0-9]+)\ local_rank=([0-9]+)\ local_size=([0-9]+)\ node=([0-9]+)\ allreduce=([0-9.eE+-]+)$ ]]; then
      echo "  malformed line: '$line'" >&2
      errs=1
      continue
    fi
    r=${BASH_REMATCH[2]}
    local want="probe kind=$kind rank=$r size=4 local_rank=$((r % per)) local_size=$per node=$((r / per)) allreduce=10"
    if [ "$r" -gt 3 ]; then
      echo "  rank $r out of range: '$line'" >&2
      errs=1
    elif [ -n "${seen[$r]:-}" ]; then
      echo "  rank $r reported twice" >&2
      errs=1
    elif [ "$line" != "$want" ]; then
      echo "  got  '$line'" >&2
      echo "  want '$want'" >&2
      errs=1
    fi
    seen[$r]=1
  done < <(grep '^probe ' "$file")
  for r in 0 1 2 3; do
    [ -n "${seen[$r]:-}" ] || { echo "  no line from rank $r" >&2; errs=1; }
  done
  return $errs
}

failures=0
# run_case NAME KIND PER_NODE COMMAND...: output to $work/NAME.{out,err}, then check_lines.
run_case() {
  local name=$1 kind=$2 per=$3 t0=$SECONDS rc
  shift 3
  timeout -k 5 45 "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
  if check_lines "$kind" "$per" "$work/$name.out"; then
    echo "ok   $name ($((SECONDS - t0)) s, exit $rc)"
  else
    echo "FAIL $name (exit $rc): $*" >&2
    echo "  --- stdout" >&2; sed 's/^/  | /' "$work/$name.out" >&2
    echo "  --- stderr (last 30 lines)" >&2; tail -n 30 "$work/$name.err" | sed 's/^/  | /' >&2
    failures=$((failures + 1))
  fi
}

run_case pmix pmix 2 srun --mpi=pmix -N2 -n4 -t 2 "$probe" --timeout 30
run_case pmi2 pmi2 2 srun --mpi=pmi2 -N2 -n4 -t 2 "$probe" --timeout 30
run_case slurm slurm 2 env MASTER_ADDR=127.0.0.1 srun --mpi=none -N2 -n4 -t 2 "$probe" --timeout 30

# torchrun's convention, as `dptrain --nproc 4` sets it: env_launch PER_NODE starts 4 local
# processes, PER_NODE ranks per simulated node (GROUP_RANK = node id).
env_launch() {
  local per=$1 port pids=() r rc=0
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
         echo $((30000 + $$ % 20000)))
  for r in 0 1 2 3; do
    RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOCAL_RANK=$((r % per)) LOCAL_WORLD_SIZE=$per \
      GROUP_RANK=$((r / per)) "$probe" --timeout 30 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=$?; done
  return $rc
}
export -f env_launch
export probe
run_case env-2x2 env 2 bash -c 'env_launch 2'
run_case env-1x4 env 4 bash -c 'env_launch 4'

echo "total $((SECONDS - t_start)) s"
[ $failures -eq 0 ] || fail "$failures of 5 launches wrong (outputs above)"
echo "PASS"
