#!/usr/bin/env python3
"""GPT training throughput on the CPU: dptrain's gpt2 preset against the same GPT in PyTorch eager.

    tools/bench/gpt_vs_torch.py [--build build] [--pairs 3] [--threads 1,2] [--dropout 0.0]
                                [--steps 6] [--warmup 2] [--torch-python /opt/dptrain-venv/bin/python]
                                [--gemm auto|onednn|openblas|mkl]   (dptrain's train.cpu_gemm)
                                [--precision fp32,bf16]   (the rows' precisions, default fp32)

The model is nanoGPT's shakespeare-char size: 6 layers, 6 heads, 384 dims, block 256, vocabulary
65, batch 16 (4096 tokens a step), f32. Both sides train on one batch of random token ids held in
memory (no loader on either side) and time whole steps: zero_grad, forward, the mean cross-entropy
over every position, backward, AdamW. dptrain: build/gpt_step_bench (the gpt2 preset on the oneDNN
backend); PyTorch: tests/oracle/gpt_torch.py's GPT (nanoGPT's model: F.scaled_dot_product_attention
with is_causal, GELU tanh, tied head), torch.optim.AdamW (its default implementation), both with
the thread count of the row (OMP_NUM_THREADS; torch.set_num_threads).
bf16 rows: dptrain's train.precision = "bf16" on the CPU (the linear products on oneDNN's
bf16 x bf16 -> f32 matmul) against torch.autocast("cpu", dtype=torch.bfloat16) around the forward
and the loss (its bf16 matmuls, f32 elsewhere); both keep f32 weights and AdamW.

Pairs are interleaved (dptrain, then torch, per pair), so a change in the machine's load hits both;
a row's ratio is dptrain's tokens/s over torch's in the same pair (the table: median [min-max]
over the pairs); tokens/s is each run's median step after warm-up. Peak RSS is each process's
(GNU time), the largest over the pairs. The 1-minute load average is sampled every 10 s.
Output: a markdown table on stdout, progress on stderr.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from bench_load import LoadSampler

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODEL = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65, batch=16)

TORCH_STEP = r"""
import json, sys, time, statistics, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
from gpt_torch import GPT
threads, warmup, steps, dropout = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
m = json.loads(sys.argv[6])
bf16 = sys.argv[7] == "bf16"
torch.set_num_threads(threads)
torch.manual_seed(1)
model = GPT(m["n_layer"], m["n_head"], m["n_embd"], m["block_size"], m["vocab_size"], bias=True, dropout=dropout)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.99), weight_decay=0.1)
B, T, V = m["batch"], m["block_size"], m["vocab_size"]
x = torch.randint(0, V, (B, T)); y = torch.randint(0, V, (B, T))
ms = []
for s in range(warmup + steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
    loss.backward()
    opt.step()
    if s >= warmup: ms.append((time.perf_counter() - t0) * 1000)
med = statistics.median(ms)
print(json.dumps({"tokens_per_s": B * T / (med / 1000), "median_step_ms": med, "step_ms": ms}))
"""


def timed(cmd, env):
    """Runs cmd under GNU time; returns (its JSON line, peak RSS in MiB)."""
    t = shutil.which("time") or "/usr/bin/time"
    p = subprocess.run([t, "-f", "RSS_KB %M"] + cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    rss = [int(l.split()[1]) for l in p.stderr.splitlines() if l.startswith("RSS_KB ")]
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line), (rss[-1] / 1024 if rss else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--gemm", default="auto", choices=["auto", "onednn", "openblas", "mkl"],
                    help="dptrain's train.cpu_gemm (the projections' GEMM library)")
    ap.add_argument("--precision", default="fp32",
                    help="comma-separated: fp32 (torch eager) and/or bf16 (torch CPU autocast bf16)")
    ap.add_argument("--torch-python", default=os.environ.get("DPTRAIN_VENV", "/opt/dptrain-venv") + "/bin/python")
    args = ap.parse_args()
    bench = os.path.join(args.build, "gpt_step_bench")
    if not os.access(bench, os.X_OK):
        raise SystemExit(f"{bench} not built: ninja -C {args.build} gpt_step_bench")
    m = MODEL
    load = LoadSampler(every=10.0)
    rows = []
    for prec, threads in [(p, int(t)) for p in args.precision.split(",") for t in args.threads.split(",")]:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        ratios, ours, theirs, rss_ours, rss_theirs = [], [], [], [], []
        for pair in range(args.pairs):
            d, rd = timed([bench, *(str(m[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size",
                                                         "batch")), str(args.warmup), str(args.steps),
                           str(args.dropout), "onednn", args.gemm, prec], env)
            t, rt = timed([args.torch_python, "-c", TORCH_STEP, os.path.join(REPO, "tests", "oracle"), str(threads),
                           str(args.warmup), str(args.steps), str(args.dropout), json.dumps(m), prec], env)
            ratios.append(d["tokens_per_s"] / t["tokens_per_s"])
            ours.append(d["tokens_per_s"]), theirs.append(t["tokens_per_s"])
            rss_ours.append(rd), rss_theirs.append(rt)
            sys.stderr.write(f"{prec} threads {threads} pair {pair + 1}: dptrain {d['tokens_per_s']:.0f} tok/s "
                             f"({d['median_step_ms']:.0f} ms/step), torch {t['tokens_per_s']:.0f} tok/s "
                             f"({t['median_step_ms']:.0f} ms/step), ratio {ratios[-1]:.2f}; load "
                             f"{os.getloadavg()[0]:.2f}\n")
        rows.append((prec, threads, ratios, ours, theirs, max(rss_ours), max(rss_theirs)))
    loads = load.finish()
    print(f"GPT {m['n_layer']} layers, {m['n_head']} heads, {m['n_embd']} dims, block {m['block_size']}, vocab "
          f"{m['vocab_size']}, batch {m['batch']}, dropout {args.dropout}, dptrain cpu_gemm {args.gemm}; "
          f"{args.pairs} interleaved pairs of "
          f"{args.steps} timed steps after {args.warmup}; 1-minute load average during the bench: "
          f"min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f} ({len(loads)} samples)\n")
    print("| precision (torch) | threads | dptrain tokens/s | torch tokens/s | ratio median [min-max] | "
          "peak RSS MiB dptrain / torch |")
    print("|---|---|---|---|---|---|")
    for prec, threads, ratios, ours, theirs, ro, rt in rows:
        side = "bf16 (autocast)" if prec == "bf16" else "fp32 (eager)"
        print(f"| {side} | {threads} | {statistics.median(ours):,.0f} | {statistics.median(theirs):,.0f} | "
              f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] | {ro:,.0f} / {rt:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
