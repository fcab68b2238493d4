#!/usr/bin/env bash
# ckpt_async.sh: what checkpoints cost the step (issue 32), on gpt_tiny (models/gpt_tiny.cfg,
# byte-level shards of the GPL-3 text made here) with a checkpoint every EVERY steps: the same
# run without checkpoints ("none"), with synchronous ones ("sync") and with checkpoint.async
# ("async"), interleaved (none sync async, none sync async, ...: a shared machine's load drifts).
# A benchmark, not a test.
#
#   tools/bench/ckpt_async.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/dptrain)
#
# Environment: STEPS (100), EVERY (10), SKIP (20: the first steps, warm-up and the first saves'
# allocations, are left out), ROUNDS (3), THREADS (the cfg's train.threads; unset: dptrain's
# default).
#
# The figure is wall time per step over steps SKIP+1..STEPS, from the `time` field (seconds since
# the run started) of metrics.jsonl's train lines, one per step (train.log_every = 1): a save runs
# between two steps' lines, so a window holding saves pays for them there. Prints each run's mean,
# within a run the mean of the steps whose interval holds a save against the others',
# the mean time a save holds the training thread (rank 0's log), and per mode the mean over rounds
# and its ratio to "none".
set -euo pipefail

BUILD=${1:-build}
STEPS=${STEPS:-100}
EVERY=${EVERY:-10}
SKIP=${SKIP:-20}
ROUNDS=${ROUNDS:-3}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dptrain=$(cd "$BUILD" && pwd)/dptrain
[ -x "$dptrain" ] || { echo "ckpt_async.sh: $dptrain is not built" >&2; exit 2; }
tmp=$(mktemp -d /tmp/dptrain-ckpt-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$dptrain" make-shards /usr/share/common-licenses/GPL-3 --out "$tmp/gpl3" > "$tmp/shards.log" 2>&1 \
  || { cat "$tmp/shards.log" >&2; exit 1; }
threads=()
[ -n "${THREADS:-}" ] && threads=("train.threads=$THREADS")

run_mode() {  # mode round -> prints the mean seconds per step
  local mode=$1 round=$2 every=$EVERY async=false
  [ "$mode" = none ] && every=0
  [ "$mode" = async ] && async=true
  "$dptrain" "$repo/models/gpt_tiny.cfg" --run-dir "$tmp/runs" --name "$mode-$round" --log-level info --set \
    "data.path=\"$tmp/gpl3/train_*.bin\"" "data.val_path=\"$tmp/gpl3/val_*.bin\"" "train.steps=$STEPS" \
    train.log_every=1 train.eval_every=0 run.tensorboard=false checkpoint.final=false \
    "checkpoint.every_steps=$every" "checkpoint.async=$async" "${threads[@]}" > "$tmp/$mode-$round.log" 2>&1 \
    || { tail -5 "$tmp/$mode-$round.log" >&2; exit 1; }
  python3 - "$tmp/runs/$mode-$round/metrics.jsonl" "$SKIP" "$STEPS" "$EVERY" <<'PY'
import json, sys
path, skip, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = {}
for line in open(path):
    j = json.loads(line)
    if j.get("split") == "train": t[j["step"]] = j["time"]
every = int(sys.argv[4])
# Within the run too (the load drifts less over one run than between runs): the steps whose
# interval holds a save (step s+1 after the save of step s, s a multiple of EVERY) against the
# others; for "none" the same steps, without saves: the control.
d = {s: t[s] - t[s - 1] for s in range(skip + 1, steps + 1)}
held = [v for s, v in d.items() if every > 0 and (s - 1) % every == 0]
free = [v for s, v in d.items() if not (every > 0 and (s - 1) % every == 0)]
inrun = f"; in-run: {sum(held) / len(held):.4f} s/step after a multiple of {every}, {sum(free) / len(free):.4f} after the others" if held else ""
print(f"{(t[steps] - t[skip]) / (steps - skip):.4f}{inrun}")
PY
}

# What one save holds the training thread for, from rank 0's log: a synchronous checkpoint's
# "checkpoint <file> (X MB in Y s)" lines, an asynchronous one's "X MB host snapshot in Y s".
save_stall() {  # run mode -> the mean time a save held the training thread (the last step's left out)
  python3 - "$tmp/runs/$1/logs/rank-0.log" "$2" "$(printf 'step-%08d' "$STEPS")" <<'PY'
import re, sys
log, mode, last = sys.argv[1:]
pattern = r"host snapshot in ([0-9.]+) s" if mode == "async" else r"MB in ([0-9.]+) s\)"
s = [float(m.group(1)) for line in open(log) if last not in line for m in [re.search(pattern, line)] if m]
print(f"{1e3 * sum(s) / len(s):.1f} ms over {len(s)} saves" if s else "no saves")
PY
}

declare -A sum
for mode in none sync async; do sum[$mode]=0; done
for round in $(seq 1 "$ROUNDS"); do
  for mode in none sync async; do
    line=$(run_mode "$mode" "$round")
    s=${line%%;*}
    stall=${line#"$s"}
    [ "$mode" = none ] || stall="$stall; a save holds the step $(save_stall "$mode-$round" "$mode")"
    echo "round $round $mode: $s s/step over steps $((SKIP + 1))..$STEPS$stall"
    sum[$mode]=$(python3 -c "print(${sum[$mode]} + $s)")
  done
done
for mode in none sync async; do
  python3 -c "m = ${sum[$mode]} / $ROUNDS; b = ${sum[none]} / $ROUNDS; print(f'$mode: mean {m:.4f} s/step, {m / b:.3f}x none')"
done
