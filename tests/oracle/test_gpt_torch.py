#!/usr/bin/env python3
"""Oracle: the gpt2 preset against a PyTorch GPT with nanoGPT's names (tests/oracle/gpt_torch.py).

A small GPT (2 layers, 4 heads, 64 dims, block 32, vocabulary 256; with and without biases) is made
in PyTorch (nanoGPT's init, then its LayerNorm weights and biases moved off 1 and 0 so that every
parameter shows in the output) and saved as a state_dict; tests/oracle/gpt_dump.cpp loads it
through model.init's loader into dptrain's gpt2 preset (once with both names of the tied
embedding in the file, once with transformer.wte.weight only), on the oneDNN and the reference
CPU backends, and returns what PyTorch (f32, dropout 0) is compared with:
  logits of the first forward            max |ours - torch| <= 1e-5 (absolute)
  every parameter's gradient of the mean cross-entropy over all N*T positions (the tied embedding's
  gradient is the sum of both uses in both)
                                         max |ours - torch| / max |torch| <= 1e-4, per parameter
  the loss before each of 20 AdamW steps on the same batch (torch.optim.AdamW on all parameters,
  lr 1e-3, betas (0.9, 0.95), weight decay 0.1)
                                         max |ours - torch| <= 1e-4
  dptrain's final weights (final.safetensors) load into the PyTorch GPT with strict=True.
Then, when `transformers` is installed (tools/setup.sh installs it, pinned), a Hugging Face
GPT2LMHeadModel from a random init, saved with save_pretrained (safetensors, lm_head left out as
tied), and its GPT2Model-style state_dict (no "transformer." prefix, with the attention-mask
buffers attn.bias and attn.masked_bias of older checkpoints) load through model.init and give
Hugging Face's logits within 1e-5. Without it that part is skipped, saying so.

Run by ctest as: python test_gpt_torch.py --build-dir <build>. Prints a table; exits non-zero on a failure.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_torch import GPT  # noqa: E402

CFG = dict(n_layer=2, n_head=4, n_embd=64, block_size=32, vocab_size=256)
N = 4
OPT = dict(steps=20, lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
TOL = dict(logits=1e-5, grad=1e-4, losses=1e-4)
rows = []  # (case, what, error, tol)


def check(case, what, err, tol):
    rows.append((case, what, err, tol))


def meta(bias):
    m = {k: str(v) for k, v in CFG.items()}
    m.update({k: str(v) for k, v in OPT.items()})
    m["bias"] = "1" if bias else "0"
    return m


def perturbed(model, seed):
    """LayerNorm weights off 1, biases off 0: every parameter shows in the output."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


def torch_reference(state, x, y, bias):
    model = GPT(**CFG, bias=bias)
    model.load_state_dict(state)
    V = CFG["vocab_size"]
    logits = model(x)
    F.cross_entropy(logits.view(-1, V), y.view(-1)).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model = GPT(**CFG, bias=bias)
    model.load_state_dict(state)
    opt = torch.optim.AdamW(model.parameters(), lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"],
                            weight_decay=OPT["weight_decay"])
    losses = []
    for _ in range(OPT["steps"]):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return logits.detach(), grads, torch.tensor(losses, dtype=torch.float64), model


def run_dump(helper, tmp, init, batch, backend, tag):
    out, final = os.path.join(tmp, f"out_{tag}.safetensors"), os.path.join(tmp, f"final_{tag}.safetensors")
    subprocess.run([helper, init, batch, out, final, backend], check=True)
    return load_file(out), final


def nanogpt_cases(helper, tmp):
    torch.manual_seed(0)
    for bias, both_names in ((True, True), (False, False)):
        case = f"gpt bias={bias}"
        model = perturbed(GPT(**CFG, bias=bias), 1)
        state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        x = torch.randint(0, CFG["vocab_size"], (N, CFG["block_size"]))
        y = torch.randint(0, CFG["vocab_size"], (N, CFG["block_size"]))
        init, batch = os.path.join(tmp, f"init_{bias}.safetensors"), os.path.join(tmp, f"batch_{bias}.safetensors")
        saved = dict(state) if both_names else {k: v for k, v in state.items() if k != "lm_head.weight"}
        save_file(saved, init, metadata=meta(bias))
        save_file({"x": x.int(), "y": y.int()}, batch, metadata=meta(bias))
        logits, grads, losses, trained = torch_reference(state, x, y, bias)
        for backend in ("onednn", "reference"):
            c = f"{case} {backend}" + ("" if both_names else " (wte only)")
            ours, final = run_dump(helper, tmp, init, batch, backend, f"{bias}_{backend}")
            check(c, "logits (abs)", (ours["logits"] - logits).abs().max().item(), TOL["logits"])
            for name, g in grads.items():
                e = (ours["grad." + name] - g).abs().max().item() / g.abs().max().item()
                check(c, "grad " + name, e, TOL["grad"])
            check(c, f"losses of {OPT['steps']} AdamW steps", (ours["losses"] - losses).abs().max().item(),
                  TOL["losses"])
            back = GPT(**CFG, bias=bias)
            back.load_state_dict(load_file(final), strict=True)  # raises on a missing or extra name
            drift = max((p - q).abs().max().item() for p, q in zip(back.parameters(), trained.parameters()))
            check(c, "final.safetensors loads with strict=True", 0.0, 0.0)
            print(f"{c}: weights after {OPT['steps']} steps differ from torch's by at most {drift:.2e}")


def hf_cases(helper, tmp):
    try:
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        print("SKIP Hugging Face import: the transformers package is not installed (tools/setup.sh installs it)")
        return
    torch.manual_seed(1)
    conf = GPT2Config(vocab_size=CFG["vocab_size"], n_positions=CFG["block_size"], n_embd=CFG["n_embd"],
                      n_layer=CFG["n_layer"], n_head=CFG["n_head"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      layer_norm_epsilon=1e-5, activation_function="gelu_new")
    hf = perturbed(GPT2LMHeadModel(conf), 2).eval()
    x = torch.randint(0, CFG["vocab_size"], (N, CFG["block_size"]))
    with torch.no_grad():
        want = hf(x).logits
    batch = os.path.join(tmp, "batch_hf.safetensors")
    save_file({"x": x.int(), "y": x.int()}, batch, metadata=dict(meta(True), steps="0"))
    saved = os.path.join(tmp, "hf")
    hf.save_pretrained(saved, safe_serialization=True)
    lm_file = os.path.join(saved, "model.safetensors")
    names = set(load_file(lm_file))
    assert "lm_head.weight" not in names, "save_pretrained kept the tied lm_head"
    # GPT2Model's names (no prefix) with the mask buffers older checkpoints carry.
    base = {k: v.detach().clone().contiguous() for k, v in hf.transformer.state_dict().items()}
    T = CFG["block_size"]
    for i in range(CFG["n_layer"]):
        base[f"h.{i}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        base[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    base_file = os.path.join(tmp, "hf_base.safetensors")
    save_file(base, base_file)
    for tag, f in (("GPT2LMHeadModel save_pretrained", lm_file), ("GPT2Model state_dict + mask buffers", base_file)):
        ours, _ = run_dump(helper, tmp, f, batch, "onednn", "hf")
        check(f"hf {transformers.__version__} {tag}", "logits (abs)", (ours["logits"] - want).abs().max().item(),
              TOL["logits"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    helper = os.path.join(args.build_dir, "tests", "gpt_dump")
    if not os.access(helper, os.X_OK):
        print(f"helper {helper} not built: run `ninja -C {args.build_dir} gpt_dump`")
        return 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        nanogpt_cases(helper, tmp)
        hf_cases(helper, tmp)
    print(f"{'case':<44} {'check':<52} {'error':>10} {'tol':>8}  result")
    failed = 0
    for case, what, e, tol in rows:
        ok = e <= tol
        failed += not ok
        print(f"{case:<44} {what:<52} {e:>10.2e} {tol:>8.0e}  {'ok' if ok else 'FAIL'}")
    if failed:
        print(f"FAIL: {failed} of {len(rows)} checks exceed their tolerance")
        return 1
    print(f"all {len(rows)} checks match PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
