#!/usr/bin/env bash
# Integration test (issue 14, dist.iface): two "hosts" as network namespaces joined by a veth pair
# (A: dpv0 10.214.0.1, B: dpv1 10.214.0.2); A also has a second network (dpw0 10.215.0.1, made
# first, so it is what A's default pick would take). With dist.iface:
#   1. MASTER_ADDR is a host name, "ha", that A's own /etc/hosts maps to 127.0.1.1 (as Debian maps
#      a host's name) and B's to 10.214.0.1: without dist.iface rank 0's store listens on
#      127.0.1.1, out of B's reach; with dist.iface = dpv0 on 10.214.0.1:PORT (both asserted on
#      the kernel's socket table, ss), and rank 1 in B (dist.iface = dpv1) joins over the veth and
#      both train to the end;
#   2. dptrain_probe across A and B prints each rank's ring address: 10.214.0.1 and 10.214.0.2;
#      two ranks inside A listen on 127.0.0.1 without dist.iface, on 10.214.0.1 with it;
#   3. an unknown interface and a down one: exit 1 and the messages naming dist.iface and A's
#      interfaces.
# Namespaces, veths, processes and /etc/netns/<ns>/hosts (what `ip netns exec` mounts on /etc/hosts)
# are this test's own (names dpi<pid>-a/-b), removed on any exit.
# Usage: bash tests/integration/test_dist_iface.sh BUILD_DIR
set -uo pipefail

build=${1:?usage: test_dist_iface.sh BUILD_DIR}
build=$(cd "$build" && pwd)
dptrain=$build/dptrain
probe=$build/dptrain_probe
tmp=$(mktemp -d /tmp/dptrain-dist-iface.XXXXXX)
A=dpi$$-a
B=dpi$$-b
pids=()
made_etc_netns=""
cleanup() {
  local p ns
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "$A" "$B"; do
    [ -e "/run/netns/$ns" ] || continue
    # shellcheck disable=SC2046
    kill -9 $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null
    ip netns del "$ns" 2>/dev/null  # deletes the veths with it
  done
  rm -rf "/etc/netns/$A" "/etc/netns/$B"
  [ -n "$made_etc_netns" ] && rmdir /etc/netns 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "== $f"; tail -8 "$f"; }; done >&2; exit 1; }

for tool in "$dptrain" "$probe"; do [ -x "$tool" ] || fail "$tool not built (cmake --build $build)"; done
for cmd in ip ss; do command -v "$cmd" > /dev/null || fail "$cmd missing (apt-get install iproute2)"; done
ip netns add "$A" || fail "cannot make a network namespace (run as root: the test needs ip netns)"
ip netns add "$B" || fail "cannot make a network namespace"
ip -n "$A" link set lo up && ip -n "$B" link set lo up &&
  ip -n "$A" link add dpw0 type veth peer name dpw1 && ip -n "$A" addr add 10.215.0.1/24 dev dpw0 &&
  ip -n "$A" link set dpw0 up && ip -n "$A" link set dpw1 up &&
  ip -n "$A" link add dpv0 type veth peer name dpv1 netns "$B" &&
  ip -n "$A" addr add 10.214.0.1/24 dev dpv0 && ip -n "$B" addr add 10.214.0.2/24 dev dpv1 &&
  ip -n "$A" link set dpv0 up && ip -n "$B" link set dpv1 up || fail "could not set up the veth pairs"
[ -d /etc/netns ] || { mkdir /etc/netns && made_etc_netns=1; }
mkdir -p "/etc/netns/$A" "/etc/netns/$B"
printf '127.0.0.1 localhost\n127.0.1.1 ha\n' > "/etc/netns/$A/hosts"
printf '127.0.0.1 localhost\n10.214.0.1 ha\n' > "/etc/netns/$B/hosts"

cat > "$tmp/tiny.cfg" <<'EOF'
[run]
name = "tiny"
[data]
dataset = "synthetic"
synthetic_shape = [1, 6, 6]
synthetic_train = 64
synthetic_eval = 16
synthetic_classes = 3
mean = [0.5]
std = [0.25]
[model]
preset = "mlp"
hidden = [8]
num_classes = 3
[train]
steps = 4
batch_size = 16
threads = 1
[checkpoint]
final = false
EOF

# in_ns NS RANK WORLD LOCAL_RANK LOCAL_WORLD NODE PORT CMD...: CMD in namespace NS as one rank of
# a torchrun-style job whose store is at $master:PORT (default ha).
in_ns() {
  local ns=$1 rank=$2 world=$3 lrank=$4 lworld=$5 node=$6 port=$7
  shift 7
  ip netns exec "$ns" env -i PATH="$PATH" HOME="${HOME:-/root}" OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    RANK="$rank" WORLD_SIZE="$world" LOCAL_RANK="$lrank" LOCAL_WORLD_SIZE="$lworld" GROUP_RANK="$node" \
    MASTER_ADDR="${master:-ha}" MASTER_PORT="$port" DPTRAIN_JOB_TOKEN=0123456789abcdef0123456789abcdef "$@"
}
port=29517

# store_listens_on NS PORT PID: the address the store's socket in NS is bound to ("" if PID exits first).
store_listens_on() {
  local listening=""
  for _ in $(seq 200); do
    listening=$(ip netns exec "$1" ss -Hltn "sport = :$2" | awk '{print $4}')
    [ -n "$listening" ] && break
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  echo "$listening"
}

# 1. The store: where it listens without dist.iface (unreachable from B), then with it; a job
# across the veth.
in_ns "$A" 0 2 0 1 0 $port "$dptrain" "$tmp/tiny.cfg" --run-dir "$tmp/runs-x" > "$tmp/noiface.log" 2>&1 &
pids+=($!)
listening=$(store_listens_on "$A" $port "${pids[-1]}")
[ "$listening" = "127.0.1.1:$port" ] || fail "without dist.iface the store listens on '$listening', not 127.0.1.1:$port"
kill -9 "${pids[-1]}"
wait "${pids[-1]}" 2>/dev/null
port=$((port + 1))
in_ns "$A" 0 2 0 1 0 $port "$dptrain" "$tmp/tiny.cfg" --run-dir "$tmp/runs" --set dist.iface=dpv0 dist.timeout_s=60 \
  > "$tmp/train0.log" 2>&1 &
pids+=($!); r0=$!
listening=$(store_listens_on "$A" $port $r0)
[ "$listening" = "10.214.0.1:$port" ] || fail "the store listens on '$listening', not on dpv0's 10.214.0.1:$port"
in_ns "$B" 1 2 0 1 1 $port "$dptrain" "$tmp/tiny.cfg" --run-dir "$tmp/runs-b" --set dist.iface=dpv1 dist.timeout_s=60 \
  > "$tmp/train1.log" 2>&1 &
pids+=($!); r1=$!
wait "$r0" || fail "rank 0 of the job across the veth failed"
wait "$r1" || fail "rank 1 of the job across the veth failed"
grep -q "done: 4 steps" "$tmp/train0.log" || fail "rank 0 did not train its 4 steps"

# 2. The ring's listeners: across A and B, and two ranks inside A with and without dist.iface.
port=29520
in_ns "$A" 0 2 0 1 0 $port "$probe" --links --timeout 60 --iface dpv0 > "$tmp/probe0.log" 2>&1 &
pids+=($!); p0=$!
in_ns "$B" 1 2 0 1 1 $port "$probe" --links --timeout 60 --iface dpv1 > "$tmp/probe1.log" 2>&1 &
pids+=($!); p1=$!
wait "$p0" && wait "$p1" || fail "the probe across the veth failed"
grep -q "^probe kind=env rank=0 size=2 .* allreduce=3 host=.* addr=10.214.0.1 shm=-$" "$tmp/probe0.log" || fail "rank 0's ring address"
grep -q "^probe kind=env rank=1 size=2 .* allreduce=3 host=.* addr=10.214.0.2 shm=-$" "$tmp/probe1.log" || fail "rank 1's ring address"
for iface in "" dpv0; do
  port=$((port + 1))
  for r in 0 1; do
    master=10.214.0.1 in_ns "$A" $r 2 $r 2 0 $port "$probe" --links --timeout 60 ${iface:+--iface $iface} > "$tmp/local$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[-2]}" && wait "${pids[-1]}" || fail "two ranks in A (dist.iface '$iface') failed"
  want=127.0.0.1
  [ -n "$iface" ] && want=10.214.0.1
  for r in 0 1; do
    grep -q "^probe kind=env rank=$r size=2 .* allreduce=3 host=.* addr=$want shm=" "$tmp/local$r.log" ||
      fail "rank $r in A with dist.iface '$iface' does not listen on $want"
  done
done

# 3. A wrong interface: a clear error before anything listens.
err=$(in_ns "$A" 0 2 0 1 0 29530 "$probe" --iface nope0 2>&1)
[ $? -eq 1 ] || fail "an unknown interface did not exit 1: $err"
[[ $err == *'dist.iface = "nope0": this host has no interface of that name with an IPv4 address ['*'; its interfaces: lo 127.0.0.1, dpw0 10.215.0.1, dpv0 10.214.0.1. Set dist.iface to one of them, or leave it unset'* ]] ||
  fail "unknown interface message: $err"
ip -n "$A" link set dpv0 down
err=$(in_ns "$A" 0 2 0 1 0 29531 "$probe" --iface dpv0 2>&1)
[ $? -eq 1 ] || fail "a down interface did not exit 1: $err"
[[ $err == *'dist.iface = "dpv0": interface dpv0 (10.214.0.1) is down on this host ['*'; bring it up (ip link set dpv0 up) or choose another of: lo 127.0.0.1, dpw0 10.215.0.1, dpv0 10.214.0.1 (down)'* ]] ||
  fail "down interface message: $err"
echo "PASS: store and ring listeners on dist.iface's address; wrong interfaces named"
