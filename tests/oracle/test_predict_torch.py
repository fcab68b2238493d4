"""`dptrain predict` against PyTorch on the same weights: a torchvision resnet18 state_dict
(10 classes, non-trivial BN statistics) saved by PyTorch, 13 random CIFAR-10 records in a .bin
file, dptrain's resnet18 preset with data.mean/std; PyTorch computes softmax(model(x)).topk(5)
on the same pixels (u8 / 255, normalised). Checked: one JSON line per record, in input order,
naming the file and the record's index; the same top-5 classes (a swap only between classes whose
probabilities are within 1e-6) and probabilities within 1e-5; and `--nproc 2` writes the same
predictions as one process (probabilities within 1e-6).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision
from safetensors.torch import save_file

MEAN = [0.49, 0.48, 0.45]
STD = [0.25, 0.24, 0.26]


def compare(name, lines, want_classes, want_probs, path, tol, failures):
    if len(lines) != len(want_classes):
        failures.append(f"{name}: {len(lines)} lines, expected {len(want_classes)}")
        return 0.0
    worst = 0.0
    for i, (line, wc, wp) in enumerate(zip(lines, want_classes, want_probs)):
        if line.get("input") != path or line.get("index") != i:
            failures.append(f"{name}: line {i} names {line.get('input')}#{line.get('index')}, expected {path}#{i}")
        for j, (c, p) in enumerate(zip(line["classes"], line["probs"])):
            # A different class at rank j is a near-tie swap only when PyTorch's probabilities agree.
            if c != wc[j] and (c not in wc or abs(wp[j] - wp[wc.index(c)]) > 1e-6):
                failures.append(f"{name}: line {i} rank {j}: class {c}, PyTorch {wc[j]} ({line['classes']} vs {wc})")
            worst = max(worst, abs(p - wp[j]))
    if worst > tol:
        failures.append(f"{name}: probabilities differ from PyTorch's by {worst:.2e} > {tol}")
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(2)
    failures = []
    tv = torchvision.models.resnet18(num_classes=10)
    with torch.no_grad():
        for m in tv.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    tv.eval()
    rng = np.random.default_rng(5)
    n = 13
    pixels = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(n, 1), dtype=np.uint8)
    with torch.no_grad():
        x = (torch.from_numpy(pixels).float() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
        top = torch.softmax(tv(x).double(), dim=1).topk(5, dim=1)
    want_classes, want_probs = top.indices.tolist(), top.values.tolist()
    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, "resnet18.safetensors")
        save_file({k: v.contiguous() for k, v in tv.state_dict().items()}, weights)
        data = os.path.join(tmp, "records.bin")
        with open(data, "wb") as f:
            f.write(np.concatenate([labels, pixels.reshape(n, -1)], axis=1).tobytes())
        cfg = os.path.join(tmp, "p.cfg")
        with open(cfg, "w") as f:
            f.write(f'[data]\ndataset = "cifar10"\nmean = {MEAN}\nstd = {STD}\n'
                    f'[model]\npreset = "resnet18"\nnum_classes = 10\n[train]\nbatch_size = 4\n')
        outs = {}
        for nproc in (1, 2):
            out = os.path.join(tmp, f"p{nproc}.jsonl")
            cmd = [os.path.join(args.build_dir, "dptrain")] + (["--nproc", "2"] if nproc == 2 else []) + \
                  ["predict", cfg, "--weights", weights, "--input", data, "--out", out, "--log-level", "warn"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout, r.stderr)
                sys.exit(1)
            with open(out) as f:
                outs[nproc] = [json.loads(line) for line in f]
        w1 = compare("1 rank", outs[1], want_classes, want_probs, data, 1e-5, failures)
        w2 = compare("2 ranks", outs[2], [l["classes"] for l in outs[1]], [l["probs"] for l in outs[1]], data, 1e-6,
                     failures)
        print(f"predict resnet18 on {n} CIFAR records: max |p - PyTorch| {w1:.2e}; 2 ranks vs 1: {w2:.2e}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("dptrain predict matches PyTorch")


if __name__ == "__main__":
    main()
