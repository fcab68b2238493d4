#!/usr/bin/env python3
"""Oracle: every CPU layer (and the softmax cross-entropy loss) against PyTorch.

The C++ helper (tests/oracle/layers_dump.cpp) runs each case of tests/models/layer_harness.h in
f32 and in f64 and writes inputs, parameters, buffers before/after, the output, the upstream
gradient dy and the input and parameter gradients into one safetensors file. This script redoes
every forward and backward with torch.nn.functional in float64 on the same inputs and compares:

    error = max|ours - torch| / max|torch|      (per tensor)

against TOL[dtype]: f32 cases are rounded once per operation, so 1e-5 leaves ~100x headroom;
f64 cases must agree to 1e-10. num_batches_tracked must match exactly. Dropout has no torch
counterpart for our mask, so the mask is recovered from y != 0 (inputs are never 0) and y, dx
are checked against x * mask / (1 - p); the keep rate must be within 5 sd of 1 - p.

Run by ctest as: python test_layers_torch.py --build-dir <build>. Prints a table; exits
non-zero on any failure.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

FORMAT = "dptrain-layers-oracle/1"
TOL = {"f32": 1e-5, "f64": 1e-10}

rows = []  # (case, dtype, what, error, tol, ok)


def err(ours, ref):
    ours, ref = ours.double(), ref.double()
    if ours.shape != ref.shape:
        return math.inf
    scale = ref.abs().max().item() if ref.numel() else 0.0
    diff = (ours - ref).abs().max().item() if ref.numel() else 0.0
    return diff / scale if scale > 0 else diff


def check(case, what, ours, ref, tol):
    e = err(ours, ref)
    rows.append((case["name"], case["dtype"], what, e, tol, e <= tol))


def check_exact(case, what, ok, detail):
    rows.append((case["name"], case["dtype"], what + " " + detail, 0.0 if ok else math.inf, 0.0, ok))


def grads_of(outputs, dy, leaves):
    """d(sum(outputs * dy)) / d leaves."""
    return torch.autograd.grad(outputs, leaves, grad_outputs=dy)


def run_layer(case, t):
    n, a, tol = case["name"], case["args"], TOL[case["dtype"]]
    g = lambda key: t[f"{n}.{key}"].double()
    if case.get("ids", 0) > 0:  # an embedding: i32 ids, no gradient
        xs = [t[f"{n}.x"].long()]
    else:
        xs = [g("x")] if case["inputs"] == 1 else [g(f"x{k}") for k in range(case["inputs"])]
        xs = [x.clone().requires_grad_(True) for x in xs]
    params = {p: g(p).clone().requires_grad_(True) for p in case["params"]}
    dy = g("dy")
    typ = case["type"]

    if typ == "dropout" and case["training"]:
        x, y = xs[0].detach(), g("y")
        p = a["p"]
        mask = (y != 0).double()
        check(case, "y", y, x * mask / (1 - p), tol)
        check(case, "dx", g("dx"), dy * mask / (1 - p), tol)
        kept, total = mask.sum().item(), mask.numel()
        sd = math.sqrt(total * p * (1 - p))
        ok = abs(kept - total * (1 - p)) <= 5 * sd
        check_exact(case, "keep rate", ok, f"{kept / total:.3f} vs {1 - p:.3f}")
        return

    if typ == "causal_self_attention" and case["training"] and (a.get("dropout", 0) > 0 or a.get("resid_dropout", 0) > 0):
        # Our masks are (seed, step, layer)-keyed Philox draws torch cannot make; the f32/f64,
        # oneDNN/reference and finite-difference tests cover this case.
        check_exact(case, "skipped: dropout masks are dptrain's own", True, "")
        return

    if typ == "linear":
        y = F.linear(xs[0], params["weight"], params.get("bias"))
    elif typ == "conv2d":
        y = F.conv2d(xs[0], params["weight"], params.get("bias"), stride=a.get("stride", 1),
                     padding=a.get("padding", 0), groups=a.get("groups", 1))
    elif typ == "batchnorm2d":
        rm, rv = g("running_mean.before").clone(), g("running_var.before").clone()
        y = F.batch_norm(xs[0], rm, rv, params["weight"], params["bias"], training=case["training"],
                         momentum=a.get("momentum", 0.1), eps=a.get("eps", 1e-5))
        check(case, "running_mean", g("running_mean.after"), rm, tol)
        check(case, "running_var", g("running_var.after"), rv, tol)
        before = t[f"{n}.num_batches_tracked.before"].item()
        after = t[f"{n}.num_batches_tracked.after"].item()
        want = before + (1 if case["training"] else 0)
        check_exact(case, "num_batches_tracked", after == want, f"{before}->{after} (want {want})")
    elif typ == "relu":
        y = F.relu(xs[0])
    elif typ == "maxpool2d":
        k = a["kernel"]
        y = F.max_pool2d(xs[0], k, stride=a.get("stride", 0) or k, padding=a.get("padding", 0))
    elif typ == "avgpool2d":
        k = a["kernel"]
        y = F.avg_pool2d(xs[0], k, stride=a.get("stride", 0) or k, padding=a.get("padding", 0),
                         count_include_pad=True)
    elif typ == "global_avgpool":
        y = F.adaptive_avg_pool2d(xs[0], 1)
    elif typ == "flatten":
        y = torch.flatten(xs[0], 1)
    elif typ == "dropout":  # eval: identity
        y = F.dropout(xs[0], p=a["p"], training=False)
    elif typ == "add":
        y = xs[0] + xs[1]
    elif typ == "embedding":
        y = F.embedding(xs[0], params["weight"])
    elif typ == "position_embedding":
        y = xs[0] + params["weight"][: xs[0].shape[1]]
    elif typ == "layernorm":
        y = F.layer_norm(xs[0], (xs[0].shape[-1],), params["weight"], params.get("bias"), eps=a.get("eps", 1e-5))
    elif typ == "gelu":
        y = F.gelu(xs[0], approximate=a.get("approximate", "tanh"))
    elif typ == "causal_self_attention":
        x, H = xs[0], a["n_head"]
        B, T, C = x.shape
        q, k, v = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias")).split(C, dim=2)
        heads = lambda z: z.view(B, T, H, C // H).transpose(1, 2)
        att = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        y = F.linear(att.transpose(1, 2).contiguous().view(B, T, C), params["c_proj.weight"], params.get("c_proj.bias"))
    else:
        raise SystemExit(f"case {n}: layer type {typ!r} has no torch reference in this script; add one")

    check(case, "y", g("y"), y, tol)
    if case.get("ids", 0) > 0:
        xs = []  # ids: no input gradient
    leaves = xs + list(params.values())
    grads = grads_of(y, dy, leaves)
    for k, gx in enumerate(grads[:len(xs)]):
        name = "dx" if len(xs) == 1 else f"dx{k}"
        check(case, name, g(name), gx, tol)
    for pname, gp in zip(params, grads[len(xs):]):
        check(case, "d" + pname, g("d" + pname), gp, tol)


def run_loss(case, t):
    n, tol = case["name"], TOL[case["dtype"]]
    logits = t[f"{n}.logits"].double().clone().requires_grad_(True)
    labels = t[f"{n}.labels"].long()
    loss = F.cross_entropy(logits, labels, label_smoothing=case["args"]["label_smoothing"])
    (dlogits,) = torch.autograd.grad(loss, [logits])
    check(case, "loss", t[f"{n}.loss"], loss.detach().reshape(1), tol)
    check(case, "dlogits", t[f"{n}.dlogits"], dlogits, tol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    helper = os.path.join(args.build_dir, "tests", "layers_dump")
    if not os.access(helper, os.X_OK):
        print(f"helper {helper} not built: run `ninja -C {args.build_dir} layers_dump`")
        return 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "layers.safetensors")
        subprocess.run([helper, path], check=True)
        tensors = load_file(path)
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            meta = f.metadata()
    if meta.get("format") != FORMAT:
        print(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}: rebuild layers_dump and this script together")
        return 1
    cases = json.loads(meta["cases"])
    types = set()
    for case in cases:
        types.add(case["type"])
        if case["type"] == "softmax_cross_entropy":
            run_loss(case, tensors)
        else:
            run_layer(case, tensors)

    print(f"{'case':<24} {'dtype':<5} {'tensor':<34} {'error':>10} {'tol':>8}  result")
    for name, dtype, what, e, tol, ok in rows:
        print(f"{name:<24} {dtype:<5} {what:<34} {e:>10.2e} {tol:>8.0e}  {'ok' if ok else 'FAIL'}")
    failed = [r for r in rows if not r[5]]
    worst = {d: max((r[3] for r in rows if r[1] == d and r[4] > 0), default=0.0) for d in TOL}
    print(f"\n{len(cases)} cases ({len(types)} types), {len(rows)} checks; worst error "
          + ", ".join(f"{d} {worst[d]:.2e} (tol {TOL[d]:.0e})" for d in TOL))
    expected_types = {"linear", "conv2d", "batchnorm2d", "relu", "maxpool2d", "avgpool2d", "global_avgpool",
                      "flatten", "dropout", "add", "softmax_cross_entropy", "embedding", "position_embedding",
                      "layernorm", "gelu", "causal_self_attention"}
    if types != expected_types:
        print(f"FAIL: the dump covers {sorted(types)}, expected {sorted(expected_types)}")
        return 1
    if failed:
        print(f"FAIL: {len(failed)} checks exceed their tolerance:")
        for name, dtype, what, e, tol, _ in failed:
            print(f"  {name} ({dtype}) {what}: error {e:.3e} > {tol:.0e}")
        return 1
    print("all layers match PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
