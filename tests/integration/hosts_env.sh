# Sourced by the multi-host integration tests (test_hosts_*.sh), after they set $repo, $build and
# fail(): the checks they start with, the 4-host Slurm fixture (tools/slurm/fixture.sh with
# SLURM_FIXTURE_HOSTS) started and stopped by the test, and helpers to find and watch the ranks
# on each host.

# shellcheck source=tests/integration/slurm_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm_env.sh"
fixture=$repo/tools/slurm/fixture.sh
data=/usr/share/datasets/fashion-mnist

# prepare_hosts_test TOOL...: the tools built, Fashion-MNIST, the Slurm packages (a clear
# failure, never a skip); a clean launch environment; passive OpenMP waits (8 ranks, few cores).
prepare_hosts_test() {
  local tool
  for tool in "$@"; do
    [ -x "$build/$tool" ] || fail "$build/$tool not built (cmake --build $build)"
  done
  [ -f "$data/train-images-idx3-ubyte.gz" ] || fail "no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"
  require_slurm
  clean_launch_env
  export OMP_WAIT_POLICY=passive
}
HOSTS=(h1 h2 h3 h4)
cluster_dir=""

# start_hosts_cluster: 4 hosts in network namespaces, owned by this test's shell (a cluster left
# behind by a killed test is reaped by the next start); stopped by stop_hosts_cluster, which the
# caller's EXIT trap must run.
start_hosts_cluster() {
  require_slurm ip nsenter unshare
  cluster_dir=$work/slurm
  mkdir -p "$cluster_dir"
  chmod 0755 "$work" "$cluster_dir"  # the fixture's munged runs as the munge user
  local exports
  exports=$(SLURM_FIXTURE_HOSTS=4 SLURM_FIXTURE_OWNER=$$ "$fixture" start "$cluster_dir") ||
    fail "the 4-host Slurm fixture did not start (see above)"
  eval "$exports"
  [ -n "${SLURM_CONF:-}" ] || fail "fixture printed no SLURM_CONF ('$exports')"
  reap_stale_work
}

# reap_stale_work: the work folders (/tmp/dptrain-*/slurm/mode) of hosts tests that were killed
# (SIGKILL: no trap ran). The fixture's start has already reaped their namespaces and daemons;
# a folder goes once its owner pid (the prefix dpf<pid> in mode) is gone and none of its
# namespaces is left. A reused pid only keeps a folder a while longer.
reap_stale_work() {
  local m d n prefix pid
  for m in /tmp/dptrain-*/slurm/mode; do
    [ -f "$m" ] || continue
    d=${m%/slurm/mode}
    [ "$d" = "$work" ] && continue
    read -r n prefix <"$m" || continue
    pid=${prefix#dpf}
    [[ $n =~ ^[0-9]+$ && $prefix = dpf* && $pid =~ ^[0-9]+$ ]] || continue
    kill -0 "$pid" 2>/dev/null && continue
    compgen -G "/run/netns/$prefix-*" >/dev/null && continue
    echo "     removing $d: left by a killed hosts test (pid $pid)" >&2
    rm -rf "$d"
  done
}

stop_hosts_cluster() {
  [ -n "$cluster_dir" ] || return 0
  "$fixture" stop "$cluster_dir" || echo "warning: fixture stop failed for $cluster_dir" >&2
  cluster_dir=""
}

# in_cluster CMD...: CMD where srun/sinfo/scontrol reach the cluster.
in_cluster() { "$fixture" run "$cluster_dir" "$@"; }

# dptrain_pids HOST...: the pids of the dptrain processes on those hosts.
dptrain_pids() {
  local h p
  for h in "$@"; do
    for p in $("$fixture" pids "$cluster_dir" "$h" 2>/dev/null); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dptrain ] && echo "$p"
    done
  done
}

# rank_pid R HOST: the pid of rank R's dptrain process on HOST (its SLURM_PROCID).
rank_pid() {
  local p
  for p in $(dptrain_pids "$2"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_PROCID=$1" && { echo "$p"; return 0; }
  done
  return 1
}

# wait_for COND_CMD TIMEOUT_S: polls every 0.1 s; 1 at the timeout.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

now_s() { date +%s.%N; }
# elapsed_s T0: seconds since T0 (a now_s value), 2 decimals.
elapsed_s() { awk -v a="$(now_s)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
# lt A B: A < B (decimals).
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# host_of R: the host rank R runs on (srun -N4 -n8: two ranks per host, in rank order).
host_of() { echo "h$(($1 / 2 + 1))"; }
