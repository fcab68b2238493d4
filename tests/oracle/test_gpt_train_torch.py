#!/usr/bin/env python3
"""Oracle: the language-model training pieces against PyTorch.

1. The loss over every position: tokens_dump xent's mean cross-entropy and its gradient of logits
   (N, T, V) against targets (N, T) equal F.cross_entropy(logits.view(-1, V), targets.view(-1)) and
   its autograd gradient; the top-1 hits equal (argmax == target).sum() (token accuracy).
2. train.grad_clip: GradClipper over a parameter arena of several shapes equals
   torch.nn.utils.clip_grad_norm_(params, max_norm) (the returned total norm and the clipped
   gradients), for a bound that clips and one that does not.
3. train.decay_params = "matrices": 10 steps of AdamW (and SGD with momentum) with weight decay
   0.1 over the arena equal torch.optim.AdamW / SGD with nanoGPT's parameter groups: dim >= 2
   with weight_decay 0.1, dim < 2 with 0.

Run by ctest as: python test_gpt_train_torch.py --build-dir <build>. Prints a table; exits non-zero
on any failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from safetensors import safe_open

rows = []


def record(check, diff, tol):
    ok = diff <= tol
    rows.append((check, diff, tol, ok))
    return ok


def load(path):
    with safe_open(path, framework="pt") as f:
        return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}


def check_xent(tool, tmp):
    path = os.path.join(tmp, "xent.safetensors")
    subprocess.run([tool, "xent", path, "11"], check=True)
    _, t = load(path)
    logits = t["logits"].double().requires_grad_(True)
    V = logits.shape[-1]
    loss = F.cross_entropy(logits.view(-1, V), t["targets"].long().view(-1))
    loss.backward()
    record("xent: mean loss over N*T positions", abs(loss.item() - t["loss"].item()), 1e-6)
    record("xent: d loss / d logits", (logits.grad - t["dlogits"].double()).abs().max().item(), 1e-7)
    hits = (logits.detach().view(-1, V).argmax(-1) == t["targets"].long().view(-1)).sum().item()
    record("xent: top-1 hits (token accuracy)", abs(hits - t["hits"].item()), 0)


def check_clip(tool, tmp):
    for max_norm in ["0.5", "1000"]:
        path = os.path.join(tmp, f"clip{max_norm}.safetensors")
        subprocess.run([tool, "clip", path, "5", max_norm], check=True)
        meta, t = load(path)
        n = len(json.loads(meta["shapes"]))
        params = []
        for i in range(n):
            p = torch.nn.Parameter(torch.zeros_like(t[f"grad.{i}"]))
            p.grad = t[f"grad.{i}"].clone()
            params.append(p)
        total = torch.nn.utils.clip_grad_norm_(params, float(max_norm))
        record(f"clip {max_norm}: total norm (rel)", abs(total.item() - t["norm"].item()) / total.item(), 1e-6)
        diff = max((p.grad - t[f"clipped.{i}"]).abs().max().item() for i, p in enumerate(params))
        record(f"clip {max_norm}: clipped gradients", diff, 1e-8)
        if max_norm == "1000":
            same = all(torch.equal(t[f"grad.{i}"], t[f"clipped.{i}"]) for i in range(n))
            record("clip 1000: below the bound nothing changes", 0 if same else 1, 0)


def check_decay(tool, tmp):
    for kind in ["adamw", "sgd"]:
        path = os.path.join(tmp, f"decay_{kind}.safetensors")
        subprocess.run([tool, "decay", path, "9", kind], check=True)
        meta, t = load(path)
        n = len(json.loads(meta["shapes"]))
        lrs = t["lrs"]

        def replay(rule):
            params = [torch.nn.Parameter(t[f"param0.{i}"].clone()) for i in range(n)]
            # nanoGPT's configure_optimizers: decay the parameters of dim >= 2, not the others.
            groups = [{"params": [p for p in params if rule(p)], "weight_decay": 0.1},
                      {"params": [p for p in params if not rule(p)], "weight_decay": 0.0}]
            groups = [g for g in groups if g["params"]]
            if kind == "adamw":
                opt = torch.optim.AdamW(groups, lr=float(lrs[0]), betas=(0.9, 0.999), eps=1e-8, foreach=False)
            else:
                opt = torch.optim.SGD(groups, lr=float(lrs[0]), momentum=0.9, foreach=False)
            for s in range(lrs.shape[0]):
                for g in opt.param_groups:
                    g["lr"] = float(lrs[s])
                for i, p in enumerate(params):
                    p.grad = t[f"grads.{i}"][s].clone()
                opt.step()
            return max((p.detach() - t[f"param.{i}"]).abs().max().item() for i, p in enumerate(params))

        # As tests/oracle/test_optim_torch.py: the same float32 operations, an ulp on the odd element.
        record(f"decay_params=matrices {kind}: parameters after 10 steps", replay(lambda p: p.dim() >= 2), 1e-6)
        # The rule is visible: decaying every parameter ends elsewhere (this check fails if we did).
        off = replay(lambda p: True)
        record(f"decay_params=matrices {kind}: differs from decay on all (> 1e-4)", 0 if off > 1e-4 else off, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    tool = os.path.join(args.build_dir, "tests", "tokens_dump")
    if not os.path.exists(tool):
        print(f"FAIL: {tool} not found; build the tokens_dump target first", file=sys.stderr)
        sys.exit(1)
    with tempfile.TemporaryDirectory() as tmp:
        check_xent(tool, tmp)
        check_clip(tool, tmp)
        check_decay(tool, tmp)
    for check, diff, tol, ok in rows:
        print(f"{'ok  ' if ok else 'FAIL'} {check:60s} {diff:.3e} (tolerance {tol:.1e})")
    if not all(ok for *_, ok in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
