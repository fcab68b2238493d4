#!/usr/bin/env bash
# Integration test (issue 22): models/gpt_tiny.cfg end to end on byte-level token shards of a text
# every Debian machine has (/usr/share/common-licenses/GPL-3, package base-files), as the README's
# "Language models" example runs it:
#   readme   `dptrain make-shards GPL-3 --out data/gpl3` then `dptrain models/gpt_tiny.cfg` (300
#            steps, dropout 0.1, clipping): the final validation loss is at most $MAX_VAL_LOSS
#            (2.65 measured on the 2-core development machine; the training bytes' unigram model scores 3.51)
#   ref      1 process at batch 2b, 20 steps (AdamW, clipping on, dropout 0) over the first 240
#            training windows (2 epochs of 15 full steps)
#   nproc    dptrain --nproc 2 at batch b, the same 20 steps: the final weights within $ATOL of the
#            reference's (1.2e-7 measured), the two replicas identical bit for bit (diffckpt --all).
#            All 247 windows would not do: an epoch's last, partial batch is 7 windows on 1 rank
#            and 2 x 4 on 2 (DistributedSampler pads the 2 ranks' shares with a repeated window),
#            so from step 16 on the runs train on different data, as they would in PyTorch DDP.
#   killed   the README run (dropout on) killed with SIGKILL after its step-20 checkpoint, then the
#            same command again: it resumes, and its final weights equal the straight run's bit
#            for bit
# Usage: bash tests/integration/test_gpt_tiny.sh BUILD_DIR (from the repo root, as ctest runs it).
set -uo pipefail

build=${1:?usage: test_gpt_tiny.sh BUILD_DIR}
MAX_VAL_LOSS=2.85
ATOL=1e-5
t_start=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/gpt_tiny_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpt_tiny_env.sh"
gpt_tiny_setup "$build" dptrain-gpt-tiny
diffckpt=$build/diffckpt
[ -x "$diffckpt" ] || fail "$diffckpt not built (cmake --build $build --target diffckpt)"

# train NAME [FLAGS...]: dptrain gpt_tiny.cfg into $work/runs/NAME, output in $work/NAME.out.
train() { train_gpt_tiny 600 "$@"; }

make_gpl3_shards

# --- readme: the cfg as it stands
train readme || fail "the README's gpt_tiny run failed"
loss=$(eval_loss "$work/runs/readme")
[ -n "$loss" ] || fail "the README's run wrote no eval line to metrics.jsonl"
grep -q '"step":300' "$work/runs/readme/metrics.jsonl" || fail "the README's run did not reach step 300"
awk -v a="$loss" -v m="$MAX_VAL_LOSS" 'BEGIN { exit !(a <= m) }' ||
  fail "gpt_tiny's validation loss after 300 steps is $loss > $MAX_VAL_LOSS: it did not learn"
echo "ok   readme: validation loss $loss <= $MAX_VAL_LOSS after 300 steps"

# --- 2 ranks = 1 rank at twice the batch (dropout 0: the two runs draw different masks)
B=8
same=(--set data.train_limit=240 train.steps=20 train.warmup_steps=5 train.eval_every=0 model.dropout=0
      checkpoint.replicas=true)
train ref "${same[@]}" train.batch_size=$((2 * B)) train.threads=0 || fail "the 1-process reference failed"
train nproc --nproc 2 "${same[@]}" train.batch_size=$B train.threads=1 || fail "the 2-process run failed"
"$diffckpt" "$work/runs/ref/final.safetensors" "$work/runs/nproc/final.safetensors" --atol "$ATOL" >"$work/eq.diff" 2>&1 ||
  { cat "$work/eq.diff" >&2; fail "2 ranks x batch $B differ from 1 rank x batch $((2 * B)) by more than $ATOL after 20 steps"; }
"$diffckpt" --all "$work/runs/nproc/replicas" >"$work/replicas.diff" 2>&1 ||
  { cat "$work/replicas.diff" >&2; fail "the 2 ranks' replicas differ after a run with clipping"; }
grep -q '"grad_norm":[1-9]' "$work/runs/ref/metrics.jsonl" || fail "the gradient norm never exceeded train.grad_clip = 1: the clip did not act"
echo "ok   nproc: 2 ranks x batch $B = 1 rank x batch $((2 * B)) within $ATOL over 20 steps (clipped); replicas identical"

# --- kill -9 after the step-20 checkpoint, then the same command again: bitwise the straight run
killed=(--set train.steps=40 train.eval_every=0 checkpoint.every_steps=10 checkpoint.keep=0)
train straight "${killed[@]}" || fail "the straight 40-step run failed"
"$dptrain" "$cfg" --run-dir "$work/runs" --name killed "${killed[@]}" >"$work/killed.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 1 1200); do
  [ -f "$work/runs/killed/checkpoints/step-00000020.safetensors" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
[ -f "$work/runs/killed/checkpoints/step-00000020.safetensors" ] || fail "the run to kill wrote no step-20 checkpoint"
kill -9 "$pid" 2>/dev/null || fail "the run finished before it could be killed (it should take ~8 s)"
wait "$pid" 2>/dev/null
[ -f "$work/runs/killed/final.safetensors" ] && fail "the killed run wrote final.safetensors before the kill"
train killed "${killed[@]}" || fail "the resumed run failed"
grep -q "resum" "$work/killed.out" || fail "the second start did not say it resumed"
"$diffckpt" "$work/runs/straight/final.safetensors" "$work/runs/killed/final.safetensors" >"$work/resume.diff" 2>&1 ||
  { cat "$work/resume.diff" >&2; fail "killed with SIGKILL and resumed, the weights differ from the straight run's"; }
echo "ok   killed: SIGKILL after step 20, resumed: final weights bitwise the straight run's"

echo "total $((SECONDS - t_start)) s"
echo "PASS"
