#!/usr/bin/env python3
"""Prints the markdown table of docs/architecture.md's "ZeRO's bytes per rank": what train.zero = 0, 1
and 2 leave on each rank for GPT-2 124M / 350M / 774M / 1.5B with AdamW on 1, 8 and 64 ranks, every
number from `dptrain memory --json --world N` (launch/memory_estimate.h, collectives/reducer/zero_memory.h).

The bytes are the model state: parameters (whole at every stage) + gradients + optimizer state + fp32
master weights (what the stages shard); activations, the input and the workspace do not depend on it. ZeRO
runs in fp32 on CPU ranks so far, and dptrain refuses to plan what it refuses to train, so the sharded
columns are fp32 plans; the last column is the bf16 plan on a GPU at zero 0 (16-bit parameters and
gradients, fp32 master weights, gradients and moments) for comparison.

  python3 tools/zero_memory_table.py [--dptrain build/dptrain] [--models 124M,350M,774M,1.5B]
(each plan builds the model on the CPU: the 1.5B model's take about two minutes each)
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [  # GPT-2's four sizes on models/gpt2.cfg: (name, n_layer, n_head, n_embd)
    ("GPT-2 124M", 12, 12, 768),
    ("GPT-2 350M", 24, 16, 1024),
    ("GPT-2 774M", 36, 20, 1280),
    ("GPT-2 1.5B", 48, 25, 1600),
]
WORLDS = [1, 8, 64]
STATE = ["parameters", "gradients", "optimizer_state", "master_weights"]


def plan(dptrain, model, world, sets):
    _, n_layer, n_head, n_embd = model
    cmd = [dptrain, "memory", os.path.join(ROOT, "models", "gpt2.cfg"), "--world", str(world), "--json", "--set",
           f"model.n_layer={n_layer}", f"model.n_head={n_head}", f"model.n_embd={n_embd}",
           "train.optimizer=adamw", "train.accum_steps=1"] + sets
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["categories"]


def state_bytes(c):
    return sum(c[k] for k in STATE)


def gib(b):
    return f"{b / 2**30:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dptrain", default=os.path.join(ROOT, "build", "dptrain"))
    ap.add_argument("--models", default="", help="only these, e.g. 124M,1.5B (default: all four)")
    a = ap.parse_args()
    chosen = [m for m in MODELS if not a.models or m[0].split()[-1] in a.models.split(",")]
    fp32 = ["train.device=cpu", "train.precision=fp32"]
    bf16 = ["train.device=cuda", "train.precision=bf16", "train.zero=0"]
    print("| model | parameters | ranks | zero 0 | zero 1 | zero 2 | bf16 on a GPU, zero 0 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in chosen:
        ref = plan(a.dptrain, m, 1, bf16)
        params = ref["master_weights"] // 4
        for world in WORLDS:
            cells = [gib(state_bytes(plan(a.dptrain, m, world, fp32 + [f"train.zero={z}"]))) for z in (0, 1, 2)]
            print(f"| {m[0]} | {params:,} | {world} | " + " | ".join(cells) + f" | {gib(state_bytes(ref))} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
