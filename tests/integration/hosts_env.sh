# Sourced by the multi-host integration tests (test_hosts_*.sh): the 4-host Slurm fixture
# (tools/slurm/fixture.sh with SLURM_FIXTURE_HOSTS) started and stopped by the test, and helpers
# to find and watch the ranks on each host. Expects fail(), $repo and $work to be set, and
# tests/integration/slurm_env.sh sourced.

fixture=$repo/tools/slurm/fixture.sh
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
