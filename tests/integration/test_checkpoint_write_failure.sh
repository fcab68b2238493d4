#!/usr/bin/env bash
# Integration test (issue 14): rank 0 of a 2-rank job cannot write its checkpoint (its files are
# capped with `ulimit -f`, as a full disk would refuse them: "File too large" instead of "No space
# left on device"). Both ranks must fail, and rank 1 must say what happened on rank 0, not
# suggest that the ranks issued their collectives in different orders.
# Usage: bash tests/integration/test_checkpoint_write_failure.sh BUILD_DIR (DPTRAIN_BIN overrides
# the binary).
set -uo pipefail
build=${1:?usage: test_checkpoint_write_failure.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=${DPTRAIN_BIN:-$build/dptrain}
tmp=$(mktemp -d /tmp/dptrain-ckpt-fail.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "== $f"; tail -4 "$f"; done >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
token=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
for r in 0 1; do
  # Rank 0: files of at most 64 KiB (the logs fit, a checkpoint does not); SIGXFSZ ignored, so a
  # write past the cap fails with EFBIG as one past a full disk fails with ENOSPC.
  ( if [ $r = 0 ]; then ulimit -f 64; trap '' XFSZ; fi
    exec env -i PATH="$PATH" HOME="${HOME:-/root}" OMP_NUM_THREADS=1 RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" DPTRAIN_JOB_TOKEN="$token" "$dptrain" "$repo/models/fmnist_mlp.cfg" --run-dir "$tmp/runs" \
      --name full --log-level warn --set data.train_limit=1024 data.eval_limit=128 train.steps=6 train.batch_size=32 \
      model.hidden=[64] checkpoint.every_steps=3 run.tensorboard=false dist.timeout_s=60 ) > "$tmp/rank$r.log" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}" && fail "rank 0 succeeded although it could not write its checkpoint"
wait "${pids[1]}" && fail "rank 1 succeeded although rank 0 failed"
grep -q "dptrain: error: rank 0 failed to write the checkpoint .*step-00000003.safetensors.*File too large" "$tmp/rank0.log" \
  || fail "rank 0 does not say that it failed to write the checkpoint"
grep -q "dptrain: error: .*rank 0 failed to write the checkpoint .*step-00000003.safetensors.*File too large" "$tmp/rank1.log" \
  || fail "rank 1 does not say that rank 0 failed to write the checkpoint: $(grep error "$tmp/rank1.log")"
grep -qi "issued\|order" "$tmp/rank1.log" && fail "rank 1 suggests mis-ordered collectives: $(grep error "$tmp/rank1.log")"
echo "PASS: rank 1 says: $(grep 'dptrain: error' "$tmp/rank1.log")"
