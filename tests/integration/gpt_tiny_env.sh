# shellcheck shell=bash
# Sourced by the gpt_tiny integration tests (test_gpt_tiny.sh, test_gpt_tiny_bf16.sh): what both
# start with and how both train. Expects fail() to be defined by the caller.

# gpt_tiny_setup BUILD_DIR WORK_PREFIX: sets repo, build (absolute), dptrain, cfg
# (models/gpt_tiny.cfg) and text (the GPL-3 text of package base-files, on every Debian machine),
# fails when dptrain or the text is missing, keeps any launcher's rank variables away from the runs,
# and makes and enters the scratch folder work (/tmp/WORK_PREFIX.XXXXXX). On exit the processes in
# pids are killed with SIGKILL and work is removed.
gpt_tiny_setup() {
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  build=$(cd "$1" && pwd)
  dptrain=$build/dptrain
  cfg=$repo/models/gpt_tiny.cfg
  text=/usr/share/common-licenses/GPL-3
  [ -x "$dptrain" ] || fail "$dptrain not built (cmake --build $build --target dptrain)"
  [ -f "$text" ] || fail "no $text (package base-files)"
  unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT SLURM_JOB_ID SLURM_PROCID SLURM_NTASKS PMIX_RANK PMI_RANK
  export OMP_WAIT_POLICY=passive
  work=$(mktemp -d "/tmp/$2.XXXXXX")
  pids=()
  trap gpt_tiny_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cd "$work" || fail "cannot enter $work"
}

gpt_tiny_cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}

# make_gpl3_shards: `dptrain make-shards` of the text into $work/data/gpl3 (byte-level tokens).
make_gpl3_shards() {
  "$dptrain" make-shards "$text" --out data/gpl3 >"$work/shards.out" 2>&1 || { cat "$work/shards.out" >&2; fail "make-shards failed"; }
  if [ ! -f data/gpl3/train_000000.bin ] || [ ! -f data/gpl3/val_000000.bin ]; then
    fail "make-shards wrote no train_000000.bin / val_000000.bin"
  fi
}

# eval_loss RUN: the loss of metrics.jsonl's last eval line.
eval_loss() {
  grep '"split":"eval"' "$1/metrics.jsonl" 2>/dev/null | tail -n 1 | sed -nE 's/.*"loss":([-0-9.eE+]+).*/\1/p'
}

# train_gpt_tiny LIMIT_S NAME [FLAGS...]: dptrain gpt_tiny.cfg into $work/runs/NAME, killed after
# LIMIT_S seconds, output appended to $work/NAME.out (its tail on stderr when it fails); returns
# dptrain's exit status.
train_gpt_tiny() {
  local limit=$1 name=$2 t0=$SECONDS rc
  shift 2
  timeout -k 10 "$limit" "$dptrain" "$cfg" --run-dir "$work/runs" --name "$name" "$@" >>"$work/$name.out" 2>&1
  rc=$?
  echo "     $name: exit $rc in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || { tail -n 30 "$work/$name.out" | sed 's/^/  | /' >&2; }
  return $rc
}
