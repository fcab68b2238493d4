# Sourced by tools/slurm/fixture.sh: the network of the test "hosts" (SLURM_FIXTURE_HOSTS=N).
#
# One network namespace per host, each with its own UTS namespace (host name h1..hN, set by the
# daemons' start commands), its own address 10.213.0.(10+i)/24 on eth0, a veth pair to a bridge
# br0 in one more namespace, "ctl", that holds 10.213.0.1 (slurmctld, munged, and every Slurm
# client: srun, sinfo, scontrol run there, through `fixture.sh run`). Nothing is added to the
# machine's own network namespace: the addresses exist only inside ours, so every fixture can use
# the same subnet and the same Slurm ports, and nothing is sent anywhere else.
#
# Names: dpf<owner>-ctl, dpf<owner>-h1 ... where <owner> is the pid of the process that owns the
# cluster (SLURM_FIXTURE_OWNER, default the caller's parent). Every namespace is listed in
# DIR/netns.list before it is made, so `stop` removes exactly what `start` made, even after a
# partial start. A cluster whose owner died without stopping it (the test was SIGKILLed) is
# reaped by the next start: its processes (all of them live in its namespaces) are killed by pid,
# its namespaces deleted (which deletes their veths and the bridge).
#
# Linux facts this relies on (checked on the CI kind of machine): veth and bridge devices work
# inside namespaces; `ip link set vethX down` on the bridge side takes the host's carrier down
# (a cut link: packets vanish, no reset); tc netem, dummy devices, iptables and nft do not exist.

netns_prefix() { echo "dpf$1"; }
NETNS_SUBNET=10.213.0
netns_host_addr() { echo "$NETNS_SUBNET.$((10 + $1))"; }  # host i (1-based)
NETNS_CTL_ADDR=$NETNS_SUBNET.1

# netns_exists NAME
netns_exists() { [ -e "/run/netns/$1" ]; }

# netns_kill_members NAME: SIGKILL every process in namespace NAME (by pid) and wait for them.
netns_kill_members() {
  local ns=$1 pids i
  netns_exists "$ns" || return 0
  for i in $(seq 50); do
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -n "${pids// /}" ] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  say "processes still in namespace $ns after SIGKILL: $pids"
}

# netns_teardown LIST_FILE: kill what is left in the namespaces listed, delete them.
netns_teardown() {
  local list=$1 ns
  [ -f "$list" ] || return 0
  while read -r ns; do
    [ -n "$ns" ] || continue
    netns_kill_members "$ns"
    if netns_exists "$ns"; then ip netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"; fi
  done <"$list"
  rm -f "$list"
}

# netns_reap_stale: clusters whose owner process is gone (names dpf<pid>-*).
netns_reap_stale() {
  local f ns pid
  for f in /run/netns/dpf*-*; do
    [ -e "$f" ] || continue
    ns=${f##*/}
    pid=${ns#dpf}
    pid=${pid%%-*}
    [[ $pid =~ ^[0-9]+$ ]] || continue
    kill -0 "$pid" 2>/dev/null && continue
    say "reaping namespace $ns of a cluster whose owner (pid $pid) is gone"
    netns_kill_members "$ns"
    ip netns del "$ns" 2>/dev/null || true
  done
}

# netns_up LIST_FILE PREFIX N: the ctl namespace with the bridge, N host namespaces with their
# veth pairs and addresses. Every name goes to LIST_FILE before it is made.
netns_up() {
  local list=$1 prefix=$2 n=$3 ctl=$2-ctl i ns
  echo "$ctl" >>"$list"
  ip netns add "$ctl"
  ip -n "$ctl" link set lo up
  ip -n "$ctl" link add br0 type bridge
  ip -n "$ctl" addr add "$NETNS_CTL_ADDR/24" dev br0
  ip -n "$ctl" link set br0 up
  for i in $(seq "$n"); do
    ns=$prefix-h$i
    echo "$ns" >>"$list"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ctl" link add "veth-h$i" type veth peer name eth0 netns "$ns"
    ip -n "$ctl" link set "veth-h$i" master br0
    ip -n "$ctl" link set "veth-h$i" up
    ip -n "$ns" addr add "$(netns_host_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}
