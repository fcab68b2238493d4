#!/usr/bin/env bash
# A real Slurm cluster on this host for tests: munged, slurmctld and two slurmd "nodes" (n1, n2),
# all on loopback, every file under DIR. Needs root and the packages tools/setup.sh installs
# (slurm-wlm slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libpmix-dev libpmi2-0);
# installs nothing itself.
#
#   tools/slurm/fixture.sh start DIR    start (or reuse) the cluster; prints `export SLURM_CONF=...`
#                                       on stdout (eval it), progress on stderr
#   tools/slurm/fixture.sh stop DIR     stop exactly the daemons `start` started (by their pid
#                                       files), wait for them to exit
#   tools/slurm/fixture.sh status DIR   one line per daemon and sinfo; exit 0 when all are up
#
# Layout of DIR: slurm.conf, munge/ (socket, pid, log, seed: our own munged, run as the munge
# user), run/ (pid files), log/, state/, spool/n1 spool/n2, tmpfs/n1 tmpfs/n2 (TmpFS per node, so
# the two pmix step daemons do not share /tmp/spmix_appdir_*).
# Ports: slurmctld $SLURM_FIXTURE_PORT (default 17000), slurmd n1/n2 on the next two (17001/17002).
# $SLURM_FIXTURE_FIRST_JOB_ID sets FirstJobId (default 1). $SLURM_FIXTURE_CRED_EXPIRE (seconds,
# at least 5) sets AuthInfo's cred_expire (default: Slurm's 120): the lifetime of a job step
# credential, which is also how long a requeued job waits before it may start again (slurmd
# revokes the old run's credential; `scontrol update StartTime=now` does not help: the job is
# then killed as "non-startable: Job credential revoked"). A pending job whose begin time passes
# (such a requeued job) is started only by the main scheduling loop, so that loop runs every
# second (SchedulerParameters=sched_interval=1; Slurm's default is 60 s). Each node declares 2 CPUs
# (SlurmdParameters=config_overrides: whatever the machine has), so `srun -N2 -n4` places ranks
# 0,1 on n1 and 2,3 on n2. Nodes n1/n2 are not resolvable host names: steps that need a master
# address should set MASTER_ADDR=127.0.0.1 (the Slurm env bootstrap prefers it to
# SLURM_JOB_NODELIST). /etc/hosts is left alone.
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2
say() { printf '[slurm-fixture] %s\n' "$*" >&2; }
die() { printf '[slurm-fixture] error: %s\n' "$*" >&2; exit 1; }

port=${SLURM_FIXTURE_PORT:-17000}
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

setup_paths() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  conf=$dir/slurm.conf
  munge_sock=$dir/munge/munge.socket
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
  out=$(SLURM_CONF=$conf timeout 10 sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
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
  for c in /usr/sbin/munged munge unmunge /usr/sbin/slurmctld /usr/sbin/slurmd sinfo srun scontrol; do
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
  if ! runuser -u munge -- /usr/sbin/munged --socket="$munge_sock" --pid-file="$dir/munge/munged.pid" \
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

write_conf() {
  local host
  host=$(hostname -s)
  mkdir -p "$dir"/{run,log,state} "$dir"/spool/{n1,n2} "$dir"/tmpfs/{n1,n2}
  cat >"$conf" <<EOF
# Written by tools/slurm/fixture.sh: a two-node test cluster on loopback.
ClusterName=dptrain-test
FirstJobId=${SLURM_FIXTURE_FIRST_JOB_ID:-1}
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
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
SlurmdTimeout=30
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + 2)) CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
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
  start_munge
  write_conf
  SLURM_CONF=$conf /usr/sbin/slurmctld -f "$conf" -c || { tail_logs; die "slurmctld did not start"; }
  local n
  for n in "${nodes[@]}"; do
    SLURM_CONF=$conf /usr/sbin/slurmd -f "$conf" -N "$n" || { tail_logs; die "slurmd -N $n did not start"; }
  done
  local deadline=$((SECONDS + ${SLURM_FIXTURE_TIMEOUT:-60}))
  until all_up; do
    if [ $SECONDS -ge $deadline ]; then
      say "nodes not idle after ${SLURM_FIXTURE_TIMEOUT:-60} s; sinfo says:"
      SLURM_CONF=$conf timeout 10 sinfo -N >&2 || true
      tail_logs
      stop_all
      die "the cluster in $dir did not come up"
    fi
    sleep 0.2
  done
  say "up in $((SECONDS - t0)) s: nodes n1 n2 idle (slurmctld port $port, SLURM_CONF=$conf)"
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
    SLURM_CONF=$conf timeout 10 sinfo -N 2>&1 || rc=1
  fi
  return $rc
}

case "$cmd" in
  start) start ;;
  stop) setup_paths; stop_all ;;
  status) status ;;
  *) usage ;;
esac
