#!/usr/bin/env python3
"""Oracle: runtime/optim (SGD, AdamW, lr schedules) against torch.optim.

1. The C++ helper (tests/oracle/optim_dump.cpp) runs 10 steps of every optimizer variant on
   pseudo-random parameters and gradients with a per-step learning rate and writes the inputs,
   final parameters and final optimizer state to a safetensors file. Python replays the same
   steps with torch.optim.SGD / torch.optim.AdamW in float32 and compares.
2. The helper prints lr_at for several schedule configurations; Python compares them with
   torch.optim.lr_scheduler (LambdaLR, StepLR, CosineAnnealingLR, LinearLR + SequentialLR).

Prints a table; exits non-zero on any failure. Run by ctest as:
    python test_optim_torch.py --build-dir <build>
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch
from safetensors import safe_open

# Optimizers: both sides compute in float32 with the same operations in the same order, and our
# kernels use fused multiply-adds where torch's vectorised CPU kernels do (kernels/cpu/optim_*.cpp),
# so SGD agrees bit for bit and AdamW to within an ulp on the odd element (the remaining
# difference depends on which SIMD path torch picks for a given CPU). An ulp is 1.2e-7..4.8e-7 for
# parameters of magnitude 1..4, so 1e-6 leaves room for a couple of such roundings, while a real
# semantic mistake (first-step momentum, dampening, decay order, bias correction, eps placement)
# shows up as 1e-4 or more. State slots can grow larger than the parameters (a momentum buffer
# sums ~1/(1-momentum) gradients), so they are compared relative to max(1, |value|).
OPTIM_TOL = 1e-6
# Schedules are computed in double on both sides, but torch's schedulers are recursive
# (chainable form: each lr is derived from the previous one), so they drift by ~1e-16 per step.
LR_REL_TOL = 1e-9

rows = []  # (check, max abs diff, tolerance, ok)


def record(check, diff, tol):
    ok = diff <= tol
    rows.append((check, diff, tol, ok))
    return ok


def run_torch(options, params0, grads, lrs, dtype):
    p = torch.nn.Parameter(params0.to(dtype).clone())
    kind = options["kind"]
    if kind == "sgd":
        opt = torch.optim.SGD([p], lr=float(lrs[0]), momentum=options["momentum"], dampening=options["dampening"],
                              weight_decay=options["weight_decay"], nesterov=options["nesterov"], foreach=False)
    elif kind == "adamw":
        opt = torch.optim.AdamW([p], lr=float(lrs[0]), betas=(options["beta1"], options["beta2"]),
                                eps=options["eps"], weight_decay=options["weight_decay"], amsgrad=False,
                                foreach=False)
    else:
        raise ValueError(f"unknown optimizer kind {kind}")
    for s in range(grads.shape[0]):
        for group in opt.param_groups:
            group["lr"] = float(lrs[s])
        p.grad = grads[s].to(dtype).clone()
        opt.step()
    return p.detach(), opt.state[p]


def check_optimizers(helper, tmp):
    path = os.path.join(tmp, "optim.safetensors")
    subprocess.run([helper, "optim", path, "20240611"], check=True)
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    variants = meta["variants"].split(",")
    if len(variants) != 6:
        record(f"expected 6 variants, got {variants}", float("inf"), 0)
    state_names = {"sgd": ["momentum_buffer"], "adamw": ["exp_avg", "exp_avg_sq"]}
    for v in variants:
        options = json.loads(meta["variant." + v])
        params0, grads, lrs = tensors[v + ".params0"], tensors[v + ".grads"], tensors[v + ".lrs"]
        ours = tensors[v + ".params"]
        theirs, state = run_torch(options, params0, grads, lrs, torch.float32)
        record(f"{v}: params vs torch f32", (ours - theirs).abs().max().item(), OPTIM_TOL)
        slots = state_names[options["kind"]] if options["kind"] == "adamw" or options["momentum"] else []
        for slot in slots:
            mine = tensors[f"{v}.state.{slot}"]
            rel = ((mine - state[slot]).abs() / state[slot].abs().clamp(min=1.0)).max().item()
            record(f"{v}: {slot} vs torch f32 (rel)", rel, OPTIM_TOL)
        if options["kind"] == "adamw":
            record(f"{v}: step count", abs(int(state["step"].item()) - grads.shape[0]), 0)
        missing = [k for k in tensors if k.startswith(v + ".state.") and k.split(".state.")[1] not in slots]
        record(f"{v}: no unexpected state {missing}", len(missing), 0)
        # For scale: how far float32 (either side) is from a float64 replay. Informational.
        exact, _ = run_torch(options, params0, grads, lrs, torch.float64)
        rows.append((f"{v}: (info) ours vs torch f64", (ours.double() - exact).abs().max().item(), None, True))


def helper_lrs(helper, count, **cfg):
    args = [helper, "lr", f"count={count}"] + [f"{k}={v}" for k, v in cfg.items()]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def torch_lrs(make_scheduler, base_lr, count):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = make_scheduler(opt)
    out = []
    for _ in range(count):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out


def check_schedules(helper):
    lr_sched = torch.optim.lr_scheduler
    cases = [
        ("constant + warmup from 0 vs LambdaLR", 0.1, 20,
         dict(kind="constant", base_lr=0.1, warmup_steps=5, warmup_start_factor=0.0, total_steps=20),
         lambda o: lr_sched.LambdaLR(o, lambda s: s / 5 if s < 5 else 1.0)),
        ("step vs StepLR", 0.1, 40,
         dict(kind="step", base_lr=0.1, step_size=7, gamma=0.5, total_steps=40),
         lambda o: lr_sched.StepLR(o, step_size=7, gamma=0.5)),
        ("step + warmup vs LinearLR -> StepLR", 0.2, 40,
         dict(kind="step", base_lr=0.2, warmup_steps=3, warmup_start_factor=0.25, step_size=7, gamma=0.5,
              total_steps=40),
         lambda o: lr_sched.SequentialLR(o, [lr_sched.LinearLR(o, start_factor=0.25, total_iters=3),
                                             lr_sched.StepLR(o, step_size=7, gamma=0.5)], milestones=[3])),
        ("cosine vs CosineAnnealingLR", 0.1, 51,
         dict(kind="cosine", base_lr=0.1, min_lr=0.001, total_steps=50),
         lambda o: lr_sched.CosineAnnealingLR(o, T_max=50, eta_min=0.001)),
        ("cosine + warmup vs LinearLR -> CosineAnnealingLR", 0.05, 61,
         dict(kind="cosine", base_lr=0.05, warmup_steps=10, warmup_start_factor=0.1, total_steps=60),
         lambda o: lr_sched.SequentialLR(o, [lr_sched.LinearLR(o, start_factor=0.1, total_iters=10),
                                             lr_sched.CosineAnnealingLR(o, T_max=50)], milestones=[10])),
        ("cosine + warmup from 0 vs LambdaLR", 1.0, 31,
         dict(kind="cosine", base_lr=1.0, warmup_steps=6, warmup_start_factor=0.0, min_lr=0.0, total_steps=30),
         lambda o: lr_sched.LambdaLR(
             o, lambda s: s / 6 if s < 6 else 0.5 * (1 + __import__("math").cos(__import__("math").pi * (s - 6) / 24)))),
    ]
    for name, base, count, cfg, make in cases:
        ours = helper_lrs(helper, count, **cfg)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SequentialLR's deprecation notes about step(epoch)
            theirs = torch_lrs(make, base, count)
        rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs))
        if len(ours) != len(theirs):
            rel = float("inf")
        record(f"lr: {name} ({count} steps, rel)", rel, LR_REL_TOL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    helper = os.path.join(args.build_dir, "tests", "optim_dump")
    if not os.access(helper, os.X_OK):
        print(f"helper {helper} not built: run `ninja -C {args.build_dir} optim_dump`")
        return 1
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="dp_optim_oracle_") as tmp:
        check_optimizers(helper, tmp)
    check_schedules(helper)

    width = max(len(r[0]) for r in rows)
    print(f"{'check':<{width}}  {'max diff':>10}  {'tolerance':>9}  result")
    for check, diff, tol, ok in rows:
        tol_s = "-" if tol is None else f"{tol:.0e}"
        print(f"{check:<{width}}  {diff:>10.3e}  {tol_s:>9}  {'ok' if ok else 'FAIL'}")
    failed = [r for r in rows if not r[3]]
    if failed:
        print(f"{len(failed)} check(s) failed")
        return 1
    print("all optimizer and schedule checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
