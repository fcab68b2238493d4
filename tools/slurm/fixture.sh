#!/usr/bin/env bash
# A real Slurm cluster on this machine for tests: munged, slurmctld and slurmd "nodes", every file
# under DIR. Two kinds:
#  - loopback (default): two slurmd nodes n1, n2 on 127.0.0.1, sharing this machine's host name;
#  - hosts (SLURM_FIXTURE_HOSTS=N, N >= 1): N hosts h1..hN, each a network namespace with its own
#    address 10.213.0.(10+i), its own host name (UTS namespace) and its own slurmd, joined by a
#    bridge in one more namespace where slurmctld and munged run (tools/slurm/netns.sh). Slurm
#    clients must run there: `fixture.sh run DIR srun ...`.
# Needs root and the packages tools/setup.sh installs (slurm-wlm slurmctld slurmd slurm-client
# slurm-wlm-basic-plugins munge libpmix-dev libpmi2-0, iproute2); installs nothing itself.
#
#   tools/slurm/fixture.sh start DIR    start (or reuse) the cluster; prints `export SLURM_CONF=...`
#                                       on stdout (eval it), progress on stderr
#   tools/slurm/fixture.sh stop DIR     stop exactly the daemons `start` started (by their pid
#                                       files), wait for them to exit; hosts: kill whatever is left
#                                       in the namespaces (by pid) and delete them
#   tools/slurm/fixture.sh status DIR   one line per daemon and sinfo; exit 0 when all are up
#   tools/slurm/fixture.sh run DIR CMD...        CMD where the Slurm clients reach the cluster
#                                                (hosts: the ctl namespace; loopback: here)
#   tools/slurm/fixture.sh pids DIR HOST         hosts: the pids of every process on HOST (h3)
#   tools/slurm/fixture.sh link DIR HOST up|down hosts: connect or cut HOST's link to the bridge
#
# Layout of DIR: slurm.conf, munge/ (socket, pid, log, seed: our own munged, run as the munge
# user), run/ (pid files), log/, state/, spool/<node>, tmpfs/<node> (TmpFS per node, so the pmix
# step daemons of two nodes do not share /tmp/spmix_appdir_*); hosts: mode (N and the namespaces'
# prefix dpf<owner>), netns.list (the namespaces made).
# Loopback ports: slurmctld $SLURM_FIXTURE_PORT (default 17000), slurmd n1/n2 on the next two.
# Hosts: every daemon on Slurm's default ports, inside the namespaces (nothing to collide with).
# The owner of a hosts cluster is $SLURM_FIXTURE_OWNER (a pid, default the caller's parent): a
# cluster whose owner died without `stop` is reaped by the next `start` of any hosts cluster.
# $SLURM_FIXTURE_SLURMD_TIMEOUT sets SlurmdTimeout (default 30 s): how long slurmctld waits for
# a silent slurmd before it marks the node DOWN and fails its jobs.
# $SLURM_FIXTURE_FIRST_JOB_ID sets FirstJobId (default 1). $SLURM_FIXTURE_CRED_EXPIRE (seconds,
# at least 5) sets AuthInfo's cred_expire (default: Slurm's 120): the lifetime of a job step
# credential, which is also how long a requeued job waits before it may start again (slurmd
# revokes the old run's credential; `scontrol update StartTime=now` does not help: the job is
# then killed as "non-startable: Job credential revoked"). A pending job whose begin time passes
# (such a requeued job) is started only by the main scheduling loop, so that loop runs every
# second (SchedulerParameters=sched_interval=1; Slurm's default is 60 s). Each node declares 2 CPUs
# (SlurmdParameters=config_overrides: whatever the machine has), so `srun -N2 -n4` places ranks
# 0,1 on the first node and 2,3 on the second. Loopback nodes n1/n2 are not resolvable host names:
# steps that need a master address should set MASTER_ADDR=127.0.0.1 (the Slurm env bootstrap
# prefers it to SLURM_JOB_NODELIST); hosts h1..hN are not in /etc/hosts either (left alone):
# host hi is 10.213.0.(10+i).
set -euo pipefail

usage() { echo "usage: $0 start|stop|status|run|pids|link DIR [...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
say() { printf '[slurm-fixture] %s\n' "$*" >&2; }
die() { printf '[slurm-fixture] error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=tools/slurm/netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/netns.sh"

port=${SLURM_FIXTURE_PORT:-17000}
hosts=0      # 0: loopback; N: N hosts in namespaces (set by setup_paths)
prefix=""    # hosts: the namespaces' name prefix
nodes=(n1 n2)
conf=""
munge_sock=""

# `pid` from `file` when that process is alive and runs `exe` (guards against a reused pid).
live_pid() {
  local file=$1 exe=$2 pid
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$exe")" ] || return 1
  echo "$pid"
}

# The cluster's kind: what DIR/mode says for an existing cluster, else $SLURM_FIXTURE_HOSTS.
setup_paths() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  conf=$dir/slurm.conf
  munge_sock=$dir/munge/munge.socket
  if [ -s "$dir/mode" ]; then
    read -r hosts prefix <"$dir/mode"
  else
    hosts=${SLURM_FIXTURE_HOSTS:-0}
    [[ $hosts =~ ^[0-9]+$ ]] && [ "$hosts" -le 200 ] || die "SLURM_FIXTURE_HOSTS='$hosts' is not a number of hosts in [0, 200]"
    prefix=$(netns_prefix "${SLURM_FIXTURE_OWNER:-$PPID}")
  fi
  if [ "$hosts" -gt 0 ]; then
    local i
    nodes=()
    for i in $(seq "$hosts"); do nodes+=("h$i"); done
  fi
}

# in_ctl CMD...: CMD where slurmctld is reachable (hosts: inside the ctl namespace).
in_ctl() {
  if [ "$hosts" -gt 0 ]; then nsenter --net="/run/netns/$prefix-ctl" "$@"; else "$@"; fi
}

# in_node NODE NAME CMD...: CMD on node NODE (hosts: in its namespace, under host name NAME in a
# UTS namespace of its own, which daemons and everything they start keep).
in_node() {
  local node=$1 name=$2
  shift 2
  if [ "$hosts" -gt 0 ]; then
    nsenter --net="/run/netns/$prefix-$node" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
  else
    "$@"
  fi
}

# pid-file:binary for every daemon of ours, in stop order.
daemons() {
  local n
  for n in "${nodes[@]}"; do echo "$dir/run/slurmd-$n.pid:/usr/sbin/slurmd"; done
  echo "$dir/run/slurmctld.pid:/usr/sbin/slurmctld"
  echo "$dir/munge/munged.pid:/usr/sbin/munged"
}

stop_all() {
  local entry file exe pid pids=() i
  for entry in $(daemons); do
    file=${entry%%:*}
    exe=${entry#*:}
    if pid=$(live_pid "$file" "$exe"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid:$exe:$file")
    fi
  done
  for entry in "${pids[@]+"${pids[@]}"}"; do
    pid=${entry%%:*}
    # up to 15 s each, then SIGKILL
    for i in $(seq 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "pid $pid did not exit after SIGTERM; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  done
  for entry in $(daemons); do rm -f "${entry%%:*}"; done
  [ ${#pids[@]} -eq 0 ] || say "stopped ${#pids[@]} daemon(s) of $dir"
}

all_up() {
  local entry
  for entry in $(daemons); do
    live_pid "${entry%%:*}" "${entry#*:}" >/dev/null || return 1
  done
  nodes_idle
}

nodes_idle() {
  local out
  out=$(SLURM_CONF=$conf in_ctl timeout 10 sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
  local n
  for n in "${nodes[@]}"; do
    grep -Eq "^$n (idle|allocated|mixed|completing)\$" <<<"$out" || return 1
  done
}

tail_logs() {
  local f
  for f in "$dir"/munge/munged.log "$dir"/log/*.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last 15 lines)" >&2
    tail -n 15 "$f" >&2
  done
}

check_tools() {
  local missing=() c
  for c in /usr/sbin/munged munge unmunge /usr/sbin/slurmctld /usr/sbin/slurmd sinfo srun scontrol ip unshare; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  [ ${#missing[@]} -eq 0 ] || die "not installed: ${missing[*]} (tools/setup.sh installs slurm-wlm, munge, libpmix-dev, ...)"
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd runs as root here)"
  getent passwd munge >/dev/null || die "no 'munge' user (is the munge package installed?)"
}

start_munge() {
  local key=/etc/munge/munge.key
  if [ ! -s "$key" ]; then
    say "creating $key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then mungekey --create --keyfile="$key"; else
      dd if=/dev/urandom bs=1 count=1024 of="$key" status=none; fi
    chown munge:munge "$key"
    chmod 400 "$key"
  fi
  # munged checks that its directories are not writable by others and reachable by it.
  chmod 0755 "$dir"
  mkdir -p "$dir/munge"
  chown munge:munge "$dir/munge"
  chmod 0755 "$dir/munge"
  if ! in_ctl runuser -u munge -- /usr/sbin/munged --socket="$munge_sock" --pid-file="$dir/munge/munged.pid" \
       --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" 2>"$dir/munge/start.err"; then
    cat "$dir/munge/start.err" >&2
    tail_logs
    die "munged did not start"
  fi
  local i
  for i in $(seq 50); do
    munge -n -S "$munge_sock" 2>/dev/null | unmunge -S "$munge_sock" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  tail_logs
  die "munged started but 'munge -n | unmunge' fails on $munge_sock"
}

# The node and partition lines, and where slurmctld is, for either kind.
node_lines() {
  local host i
  if [ "$hosts" -eq 0 ]; then
    host=$(hostname -s)
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$port"
    for i in 1 2; do
      echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN"
    done
    echo "PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  else
    echo "SlurmctldHost=ctl($NETNS_CTL_ADDR)"
    for i in $(seq "$hosts"); do
      echo "NodeName=h$i NodeHostname=h$i NodeAddr=$(netns_host_addr "$i") CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN"
    done
    echo "PartitionName=test Nodes=h[1-$hosts] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  fi
}

write_conf() {
  local n kind="two nodes on loopback"
  [ "$hosts" -eq 0 ] || kind="$hosts hosts in network namespaces"
  mkdir -p "$dir"/{run,log,state}
  for n in "${nodes[@]}"; do mkdir -p "$dir/spool/$n" "$dir/tmpfs/$n"; done
  cat >"$conf" <<EOF
# Written by tools/slurm/fixture.sh: a test cluster ($kind).
ClusterName=dptrain-test
FirstJobId=${SLURM_FIXTURE_FIRST_JOB_ID:-1}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_sock${SLURM_FIXTURE_CRED_EXPIRE:+,cred_expire=$SLURM_FIXTURE_CRED_EXPIRE}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$dir/tmpfs/%n
InactiveLimit=0
KillWait=5
MinJobAge=5
SlurmctldTimeout=30
SlurmdTimeout=${SLURM_FIXTURE_SLURMD_TIMEOUT:-30}
$(node_lines)
EOF
}

start() {
  check_tools
  setup_paths
  if all_up; then
    say "already running in $dir"
    echo "export SLURM_CONF=$conf"
    return 0
  fi
  stop_all  # whatever is left of an earlier, partial start
  local t0=$SECONDS
  if [ "$hosts" -gt 0 ]; then
    netns_reap_stale
    netns_teardown "$dir/netns.list"
    echo "$hosts $prefix" >"$dir/mode"
    netns_up "$dir/netns.list" "$prefix" "$hosts" || { stop_everything; die "could not make the hosts' network namespaces"; }
  fi
  start_munge
  write_conf
  SLURM_CONF=$conf in_node ctl ctl /usr/sbin/slurmctld -f "$conf" -c ||
    { tail_logs; stop_everything; die "slurmctld did not start"; }
  local n
  for n in "${nodes[@]}"; do
    SLURM_CONF=$conf in_node "$n" "$n" /usr/sbin/slurmd -f "$conf" -N "$n" ||
      { tail_logs; stop_everything; die "slurmd -N $n did not start"; }
  done
  local deadline=$((SECONDS + ${SLURM_FIXTURE_TIMEOUT:-60})) where="slurmctld port $port"
  [ "$hosts" -eq 0 ] || where="namespaces $prefix-*"
  until all_up; do
    if [ $SECONDS -ge $deadline ]; then
      say "nodes not idle after ${SLURM_FIXTURE_TIMEOUT:-60} s; sinfo says:"
      SLURM_CONF=$conf in_ctl timeout 10 sinfo -N >&2 || true
      tail_logs
      stop_everything
      die "the cluster in $dir did not come up"
    fi
    sleep 0.2
  done
  say "up in $((SECONDS - t0)) s: nodes ${nodes[*]} idle ($where, SLURM_CONF=$conf)"
  echo "export SLURM_CONF=$conf"
}

status() {
  setup_paths
  local entry rc=0 pid
  for entry in $(daemons); do
    if pid=$(live_pid "${entry%%:*}" "${entry#*:}"); then
      echo "$(basename "${entry%%:*}" .pid): running (pid $pid)"
    else
      echo "$(basename "${entry%%:*}" .pid): not running"
      rc=1
    fi
  done
  if [ -f "$conf" ]; then
    SLURM_CONF=$conf in_ctl timeout 10 sinfo -N 2>&1 || rc=1
  fi
  return $rc
}

# Daemons by pid, then (hosts) whatever is left in the namespaces, and the namespaces.
stop_everything() {
  stop_all
  if [ "$hosts" -gt 0 ]; then
    netns_teardown "$dir/netns.list"
    rm -f "$dir/mode"
  fi
}

# host_index HOST: i for "hi" of this hosts cluster, or a clear error.
host_index() {
  [ "$hosts" -gt 0 ] || die "$dir is a loopback cluster: it has no hosts"
  [[ $1 =~ ^h([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le "$hosts" ] ||
    die "no host '$1' in $dir (hosts h1..h$hosts)"
  echo "${BASH_REMATCH[1]}"
}

case "$cmd" in
  start) [ $# -eq 0 ] || usage; start ;;
  stop) [ $# -eq 0 ] || usage; setup_paths; stop_everything ;;
  status) [ $# -eq 0 ] || usage; status ;;
  run) [ $# -ge 1 ] || usage; setup_paths; SLURM_CONF=$conf in_ctl "$@" ;;
  pids) [ $# -eq 1 ] || usage; setup_paths; host_index "$1" >/dev/null; ip netns pids "$prefix-$1" ;;
  link)
    [ $# -eq 2 ] && { [ "$2" = up ] || [ "$2" = down ]; } || usage
    setup_paths
    i=$(host_index "$1")
    ip -n "$prefix-ctl" link set "veth-h$i" "$2"
    ;;
  *) usage ;;
esac
