#!/usr/bin/env python3
"""ZeRO on CPU ranks: dptrain train.zero = 1 (or 2, --stage 2) against zero 0 and against PyTorch DDP +
ZeroRedundancyOptimizer (gloo), 2 processes x 1 thread, side by side.

    tools/bench/zero_vs_torch.py [--build build] [--pairs 3] [--rows cnn,gpt] [--load N] [--torch-ddp]
                                 [--gpt-dropout P] [--stage 1|2] [--torch-python /opt/dptrain-venv/bin/python]

Rows (tools/bench/cpu_vs_torch.py's, whose run functions this reuses; f32, AdamW, 1 thread each):
  cnn  its "ddp" row: the Fashion-MNIST CNN (batch norm), batch 128 per rank; dptrain on
       Fashion-MNIST (its loader included), torch on in-memory random batches
  gpt  its "gpt" row: gpt_tiny (models/gpt_tiny.cfg: 4 layers, 128 dims, context 128, dropout 0.1,
       AdamW on the matrices' decay groups, clipping at 1.0), batch 32 per rank; dptrain on
       synthetic tokens, torch on in-memory random tokens; --gpt-dropout P sets both sides' dropout
       (model.dropout; torch_train_bench.py --dropout) instead of gpt_tiny's 0.1
Each pair runs, one after another (interleaved, so a change in the machine's load hits every side):
`dptrain --nproc 2 ... --set train.zero=0`, the same with train.zero=1 (--stage 2: train.zero=2, the
gradients sharded too; torch's side stays ZeroRedundancyOptimizer, which shards the optimizer state
only: PyTorch's stage-2 counterpart is FSDP's SHARD_GRAD_OP), and torchrun
--nproc_per_node 2 tools/bench/torch_train_bench.py --zero (DDP + ZeroRedundancyOptimizer wrapping
torch.optim.AdamW, eager); with --torch-ddp also plain DDP. samples/s are the whole job's (both
ranks): dptrain's median train window after the first (metrics.jsonl), torch's median window.
Ratios within a pair: zero 1's step time over zero 0's (= zero 0's samples/s over zero 1's; the
target is <= 1.05) and zero 1's samples/s over torch's (the target >= 1.5); the table gives each as
median [min-max] over the pairs, the median samples/s, and peak RSS (the largest rank's, GNU time).
Output: the markdown table on stdout with the 1-minute load average sampled every 15 s during the
bench; RESULT lines and progress on stderr. Exit 1 when a run failed (its cell shows "error").
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_vs_torch as cvt  # noqa: E402  (the dptrain and torch runs, the table's cells)
from bench_load import LoadSampler, start_load, stop_load  # noqa: E402

ROWS = {"cnn": "ddp", "gpt": "gpt"}  # this table's rows -> cpu_vs_torch's


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(cvt.REPO, "build"))
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--rows", default="cnn,gpt")
    p.add_argument("--load", type=int, default=0, help="CPU-bound busy loops to run beside the bench")
    p.add_argument("--torch-ddp", action="store_true", help="also plain DDP (torch.optim.AdamW unsharded)")
    p.add_argument("--gpt-dropout", type=float, default=None, help="the gpt row's dropout on both sides")
    p.add_argument("--cpu-backend", default="onednn", help="dptrain's train.cpu_backend")
    p.add_argument("--stage", type=int, default=1, choices=(1, 2), help="the sharded side's train.zero")
    p.add_argument("--torch-python", default=os.environ.get("DPTRAIN_VENV", "/opt/dptrain-venv") + "/bin/python")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (logs, run directories)")
    args = p.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    if any(r not in ROWS for r in rows) or args.pairs < 1:
        p.error(f"--rows from {','.join(ROWS)}, --pairs >= 1")
    work = tempfile.mkdtemp(prefix="dptrain-zerobench-")
    sampler = LoadSampler()
    load = start_load(args.load)
    sides = ["z0", "z1", "tz"] + (["tddp"] if args.torch_ddp else [])
    res = {r: {s: [] for s in sides} | {s + "_rss": [] for s in sides} | {"step": [], "vs_torch": [], "vs_ddp": []}
           for r in rows}
    failed = False
    try:
        for pair in range(args.pairs):
            for r in rows:
                row = ROWS[r]
                drop = r == "gpt" and args.gpt_dropout is not None
                got = {}
                for side in sides:
                    if side in ("z0", "z1"):
                        sets = [f"train.zero={0 if side == 'z0' else args.stage}"] + ([f"model.dropout={args.gpt_dropout}"] if drop else [])
                        v, rss, why = cvt.dptrain_run(args, row, work, sets)
                    else:
                        extra = (["--zero"] if side == "tz" else []) + (["--dropout", str(args.gpt_dropout)] if drop else [])
                        v, rss, why = cvt.torch_run(args, row, "eager", work, extra)
                    print(f"RESULT pair={pair} row={r} side={side} samples_s={v} rss={rss} {why}", file=sys.stderr,
                          flush=True)
                    got[side] = v
                    res[r][side].append(v)
                    res[r][side + "_rss"].append(rss)
                    failed |= v is None
                res[r]["step"].append(got["z0"] / got["z1"] if got["z0"] and got["z1"] else None)
                res[r]["vs_torch"].append(got["z1"] / got["tz"] if got["z1"] and got["tz"] else None)
                if args.torch_ddp:
                    res[r]["vs_ddp"].append(got["z1"] / got["tddp"] if got["z1"] and got["tddp"] else None)
    finally:
        stop_load(load)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    med, mib = cvt.median_present, cvt.mib
    num = lambda v: f"{v:,.1f}" if v else "error"
    print(f"\nhost {os.uname().nodename}, {os.cpu_count()} cores; load beside the bench: {args.load} busy loop(s); "
          f"1-minute load average during the bench: {sampler.summary()}; {args.pairs} interleaved pair(s); dptrain "
          f"train.cpu_backend = {args.cpu_backend}; the sharded side train.zero = {args.stage}; torch eager, gloo"
          + (f"; gpt dropout {args.gpt_dropout} on both sides" if args.gpt_dropout is not None else "") + "\n")
    z = f"zero {args.stage}"
    extra_h = f" | torch DDP samples/s | {z} / DDP" if args.torch_ddp else ""
    print(f"| workload (2 processes x 1 thread) | zero 0 samples/s | {z} samples/s | {z} step time / zero 0 "
          f"[min-max] | torch DDP + ZeroRedundancyOptimizer samples/s | {z} / torch [min-max]{extra_h} | "
          f"peak RSS MiB zero 0 / {z} / torch |")
    print("|---|---|---|---|---|---|" + ("---|---|" if args.torch_ddp else "") + "---|")
    for r in rows:
        x = res[r]
        extra = (f" | {num(med(x['tddp']))} | {cvt.fmt_ratio(x['vs_ddp'])}" if args.torch_ddp else "")
        rss = " / ".join(mib(med(x[s + "_rss"])) for s in ("z0", "z1", "tz"))
        print(f"| {cvt.ROWS[ROWS[r]][0]} | {num(med(x['z0']))} | {num(med(x['z1']))} | {cvt.fmt_ratio(x['step'])} | "
              f"{num(med(x['tz']))} | {cvt.fmt_ratio(x['vs_torch'])}{extra} | {rss} |")
    if args.keep:
        print(f"\nlogs and runs kept in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
