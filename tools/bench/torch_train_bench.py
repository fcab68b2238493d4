#!/usr/bin/env python3
"""Training-step benchmark in PyTorch on the models dptrain has presets for.

The reference side of tools/bench/gpu_vs_torch.sh: the same model, batch, dtype, memory format
and optimizer as the dptrain run, on synthetic data that lives on the device (so the numbers are
the training step alone, no input pipeline), eager and torch.compile.

    python3 tools/bench/torch_train_bench.py --model resnet50 --batch 256 --dtype bf16
    python3 tools/bench/torch_train_bench.py --model cifar_resnet18 --batch 128 --dtype fp16 --modes compile
    python3 tools/bench/torch_train_bench.py --smoke            # tiny CPU run: plumbing only
    torchrun --standalone --nproc_per_node 2 tools/bench/torch_train_bench.py --device cpu --dtype fp32
                                                                # DDP (gloo on the CPU, nccl on GPUs)
    torchrun ... torch_train_bench.py --device cpu --dtype fp32 --model gpt_tiny --zero --modes eager
                                                                # DDP + ZeroRedundancyOptimizer

Under torchrun (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel, every rank trains
on its own batch of --batch, and rank 0 alone prints the RESULT line, with img_s the whole job's
(world size x its own); tools/bench/cpu_vs_torch.py's DDP row runs it so. --zero (under torchrun)
wraps the optimizer in torch.distributed.optim.ZeroRedundancyOptimizer (its default: each rank
updates its shard of the parameters and broadcasts it; overlap_with_ddp off), the comparison of
dptrain's train.zero = 1 (tools/bench/zero_vs_torch.py).

Models (architectures as models/presets.cpp builds them, optimizers as the models/*.cfg set them):
  resnet50        torchvision.models.resnet50, 3x224x224, 1000 classes; SGD lr 0.1 momentum 0.9 wd 1e-4
  cifar_resnet18  torchvision resnet18 with a 3x3 stride-1 stem (no bias) and no max-pool, 3x32x32,
                  10 classes; SGD lr 0.1 momentum 0.9 Nesterov wd 5e-4
  fmnist_cnn      conv3x3(1->32, no bias) BN ReLU maxpool2 conv3x3(32->64, no bias) BN ReLU maxpool2,
                  flatten, linear 3136->128, ReLU, linear 128->10; 1x28x28; AdamW lr 0.002 wd 1e-4
  gpt2            GPT-2 124M (models/gpt2.cfg: 12 layers, 12 heads, 768 dims, context 1024, vocabulary
                  50257, biases, tied head): tests/oracle/gpt_torch.py's nanoGPT model, attention
                  through F.scaled_dot_product_attention (flash attention on the GPU); inputs and
                  targets random token ids (batch, 1024); AdamW lr 6e-4 betas (0.9, 0.95) wd 0.1 with
                  nanoGPT's groups (decay on 2-D parameters only) and fused=True on the GPU, as nanoGPT;
                  img_s is sequences/s (tokens/s = 1024 x that, in the tokens_s field)
  gpt_tiny        models/gpt_tiny.cfg's GPT: 4 layers, 4 heads, 128 dims, context 128, vocabulary 256,
                  no biases, dropout 0.1; AdamW lr 1e-3 betas (0.9, 0.99) wd 0.1 on 2-D parameters
                  only (train.decay_params = "matrices"), gradients clipped to norm 1.0 (train.grad_clip)
dtypes: bf16 = autocast(bfloat16), fp16 = autocast(float16) + GradScaler, both channels_last (images);
fp32 = no autocast, NCHW, PyTorch's default TF32 settings unless --tf32 says otherwise.
Master weights and optimizer state are fp32 in every case (what AMP does).

Timing: --warmup steps (for compile: the first step compiles; its time is reported as
compile_s), then --windows windows of equal step count, each timed with CUDA events around the
window (time.perf_counter on the CPU); the step count is chosen from the warm-up so that all
windows take about --seconds; images/s is batch * steps / time of the median window. Inputs:
--input-sets distinct random batches (normal inputs, uniform labels) rotated step by step.
Peak memory: torch.cuda.max_memory_allocated() after reset_peak_memory_stats() before the mode's
model is built (and max_memory_reserved()); it includes the resident input batches, whose size
the RESULT line gives as inputs_bytes (ResNet-50 at batch 256: 4 x 154 MB).

Output: a human line per mode on stderr, and one machine line per mode on stdout, flushed as soon
as the mode ends (so a later mode that is killed by a time box leaves the earlier ones):
  RESULT tool=torch model=M batch=B dtype=D mode=eager img_s=X step_ms=T peak_bytes=P
         reserved_bytes=R compile_s=C device=cuda status=ok|error|oom note=...
(one line; values never hold spaces). Exit status: 0 when every mode gave status=ok, 1 otherwise,
2 on a usage error.
"""
import argparse
import math
import os
import statistics
import sys
import time

MODELS = {
    # name: (C, H, W, classes, optimizer kwargs)
    "resnet50": (3, 224, 224, 1000, dict(opt="sgd", lr=0.1, momentum=0.9, nesterov=False, weight_decay=1e-4)),
    "cifar_resnet18": (3, 32, 32, 10, dict(opt="sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)),
    "fmnist_cnn": (1, 28, 28, 10, dict(opt="adamw", lr=0.002, weight_decay=1e-4)),
    # gpt2: C H W = 1 1 block_size (the sample is block_size token ids), classes = the vocabulary
    "gpt2": (1, 1, 1024, 50257, dict(opt="adamw_gpt", lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)),
    "gpt_tiny": (1, 1, 128, 256, dict(opt="adamw_gpt", lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, grad_clip=1.0)),
}
DEFAULT_BATCH = {"resnet50": 256, "cifar_resnet18": 128, "fmnist_cnn": 128, "gpt2": 16, "gpt_tiny": 32}
# The GPTs' shapes (block_size and vocab_size are MODELS' W and classes).
GPTS = {"gpt2": dict(n_layer=12, n_head=12, n_embd=768, bias=True, dropout=0.0),
        "gpt_tiny": dict(n_layer=4, n_head=4, n_embd=128, bias=False, dropout=0.1)}


def clean(s, limit=160):
    """A value for a RESULT field: no spaces or '=' (the line is split on both)."""
    s = " ".join(str(s).split())
    return "".join(c if c.isalnum() or c in "._-:/,()[]'" else "_" for c in s)[:limit] or "-"


def build_model(name, num_classes, block_size=1024, dropout=None):
    import torch.nn as nn

    if name in GPTS:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "oracle"))
        from gpt_torch import GPT

        g = GPTS[name]
        return GPT(g["n_layer"], g["n_head"], g["n_embd"], block_size, num_classes, bias=g["bias"],
                   dropout=g["dropout"] if dropout is None else dropout)
    import torchvision

    if name == "resnet50":
        return torchvision.models.resnet50(num_classes=num_classes)
    if name == "cifar_resnet18":
        m = torchvision.models.resnet18(num_classes=num_classes)
        m.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        nn.init.kaiming_normal_(m.conv1.weight, mode="fan_out", nonlinearity="relu")
        m.maxpool = nn.Identity()
        return m
    if name == "fmnist_cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(inplace=True), nn.Linear(128, num_classes))
    raise ValueError(name)


def make_optimizer(torch, model, spec, cuda, zero=False):
    """The model's optimizer; zero: wrapped in ZeroRedundancyOptimizer (the state of this rank's shard)."""
    params = list(model.parameters())
    if spec["opt"] == "adamw_gpt":  # nanoGPT's configure_optimizers: decay on 2-D parameters only
        ps = [p for p in params if p.requires_grad]
        params = [dict(params=[p for p in ps if p.dim() >= 2], weight_decay=spec["weight_decay"]),
                  dict(params=[p for p in ps if p.dim() < 2], weight_decay=0.0)]
        cls, kw = torch.optim.AdamW, dict(lr=spec["lr"], betas=spec["betas"], fused=cuda)
    elif spec["opt"] == "sgd":
        cls, kw = torch.optim.SGD, dict(lr=spec["lr"], momentum=spec["momentum"], nesterov=spec["nesterov"],
                                        weight_decay=spec["weight_decay"])
    else:
        cls, kw = torch.optim.AdamW, dict(lr=spec["lr"], weight_decay=spec["weight_decay"])
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(params, optimizer_class=cls, **kw)
    return cls(params, **kw)


def error_result(args, mode, device, status="error", note="-"):
    """A RESULT line's fields before (or without) a measurement, in the line's order."""
    return dict(tool="torch", model=args.model, batch=args.batch, dtype=args.dtype, mode=mode, img_s="-", step_ms="-",
                peak_bytes="-", reserved_bytes="-", compile_s="-", device=device, status=status, note=note)


def model_width(args):
    """W of the model's input: the image width, or the GPT's context (--image-size overrides both)."""
    return args.image_size or MODELS[args.model][2]


def make_inputs(torch, args, dev, fmt):
    """--input-sets batches on the device from their own generator: (xs, ys). GPT: token ids in,
    the next tokens as targets at every position; images: normal inputs in fmt, uniform labels."""
    c, h, w, classes, _ = MODELS[args.model]
    if args.image_size:
        h = w = args.image_size
    gen = torch.Generator(device=dev).manual_seed(1)
    if args.model in GPTS:
        xs = [torch.randint(0, classes, (args.batch, w), device=dev, generator=gen) for _ in range(args.input_sets)]
        ys = [torch.randint(0, classes, (args.batch, w), device=dev, generator=gen) for _ in range(args.input_sets)]
        return xs, ys
    xs = [torch.randn(args.batch, c, h, w, device=dev, generator=gen).contiguous(memory_format=fmt)
          for _ in range(args.input_sets)]
    ys = [torch.randint(0, classes, (args.batch,), device=dev, generator=gen) for _ in range(args.input_sets)]
    return xs, ys


def make_step(torch, args, mode, dev, fmt):
    """The model (initialised from the global seed; DDP under torchrun, compiled for mode=compile),
    its optimizer, and step(x, y): one training step on that batch, returning the loss."""
    classes, spec = MODELS[args.model][3:]
    sixteen = args.dtype in ("bf16", "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.dtype)
    gpt = args.model in GPTS
    model = build_model(args.model, classes, model_width(args), args.dropout).to(dev).to(memory_format=fmt)
    model.train()
    opt = make_optimizer(torch, model, spec, dev.type == "cuda", zero=args.zero)
    scaler = torch.amp.GradScaler(dev.type, enabled=args.dtype == "fp16")
    loss_fn = torch.nn.CrossEntropyLoss()
    fwd = model
    if torch.distributed.is_initialized():
        fwd = torch.nn.parallel.DistributedDataParallel(model)
    if mode == "compile":
        fwd = torch.compile(fwd, mode=args.compile_mode if args.compile_mode != "default" else None)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=amp_dtype, enabled=sixteen):
            out = fwd(x)
            loss = loss_fn(out.view(-1, out.size(-1)), y.view(-1)) if gpt else loss_fn(out, y)
        scaler.scale(loss).backward()
        if spec.get("grad_clip"):
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec["grad_clip"])
        scaler.step(opt)
        scaler.update()
        return loss

    return step


def warm_up(args, mode, step, sync, res):
    """--warmup steps (at least 2). The first builds cuDNN plans (and compiles, for mode=compile:
    its time is res's compile_s). Returns (the loss, seconds per step after the first)."""
    t0 = time.perf_counter()
    loss = step(0)
    sync()
    first_s = time.perf_counter() - t0
    if mode == "compile":
        res["compile_s"] = f"{first_s:.1f}"
    t0 = time.perf_counter()
    for i in range(1, max(args.warmup, 2)):
        loss = step(i)
    sync()
    per_step = (time.perf_counter() - t0) / max(max(args.warmup, 2) - 1, 1)
    if not math.isfinite(float(loss.detach())):
        res["note"] = "loss_not_finite_after_warmup"
    return loss, per_step


def timed_windows(torch, args, step, cuda, steps_per_window, loss):
    """--windows windows of steps_per_window steps from step --warmup on, each timed with CUDA
    events (time.perf_counter on the CPU). Returns (seconds per window, the last loss)."""
    times = []
    i = args.warmup
    for _ in range(args.windows):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps_per_window):
                loss = step(i)
                i += 1
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            for _ in range(steps_per_window):
                loss = step(i)
                i += 1
            times.append(time.perf_counter() - t0)
    return times, loss


def record_timing(torch, args, res, times, steps_per_window, xs, ys, cuda):
    """res's throughput (the median window, the whole job's), spread, windows, input and peak memory."""
    med = statistics.median(times)
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    res["img_s"] = f"{world * args.batch * steps_per_window / med:.1f}"
    res["step_ms"] = f"{1e3 * med / steps_per_window:.3f}"
    if args.model in GPTS:
        res["tokens_s"] = f"{model_width(args) * world * args.batch * steps_per_window / med:.0f}"
    res["spread"] = f"{(max(times) - min(times)) / med:.3f}"
    res["steps"] = f"{args.windows}x{steps_per_window}"
    res["inputs_bytes"] = str(sum(x.numel() * x.element_size() + y.numel() * y.element_size() for x, y in zip(xs, ys)))
    if cuda:
        res["peak_bytes"] = str(torch.cuda.max_memory_allocated())
        res["reserved_bytes"] = str(torch.cuda.max_memory_reserved())


def run_mode(torch, args, mode, dev):
    """Builds, warms up and times one mode. Returns a dict of RESULT fields."""
    res = error_result(args, mode, dev.type)
    cuda = dev.type == "cuda"
    channels_last = args.dtype in ("bf16", "fp16") and args.channels_last and args.model not in GPTS
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    train_step = make_step(torch, args, mode, dev, fmt)
    xs, ys = make_inputs(torch, args, dev, fmt)

    def step(i):
        return train_step(xs[i % len(xs)], ys[i % len(ys)])

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    loss, per_step = warm_up(args, mode, step, sync, res)
    steps_per_window = args.steps if args.steps else max(3, int(args.seconds / args.windows / max(per_step, 1e-6)))
    times, loss = timed_windows(torch, args, step, cuda, steps_per_window, loss)
    record_timing(torch, args, res, times, steps_per_window, xs, ys, cuda)
    final = float(loss.detach())
    if not math.isfinite(final):
        res["note"] = f"loss_not_finite:{final}"
    else:
        res["status"] = "ok"
    return res


def parse_args():
    """The options, with --smoke's and the default batch applied. Returns (args, modes)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="fmnist_cnn")
    p.add_argument("--batch", type=int, default=0, help="per-step batch (default: 256 resnet50, 128 the others)")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    p.add_argument("--compile-mode", default="default",
                   help="torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps (the first one compiles)")
    p.add_argument("--windows", type=int, default=5, help="timed windows; the median one is reported")
    p.add_argument("--seconds", type=float, default=8.0, help="about this long for all windows together")
    p.add_argument("--steps", type=int, default=0, help="steps per window (0: from --seconds)")
    p.add_argument("--input-sets", type=int, default=4, help="distinct input batches rotated step by step")
    p.add_argument("--image-size", type=int, default=0, help="override H = W (smoke runs)")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false",
                   help="keep NCHW for bf16/fp16 too")
    p.add_argument("--tf32", choices=["default", "on", "off"], default="default",
                   help="fp32 matmul/conv TF32 (default: PyTorch's own: off for matmul, on for cuDNN conv)")
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false",
                   help="do not let cuDNN time its algorithms (torch.backends.cudnn.benchmark)")
    p.add_argument("--dropout", type=float, default=None, help="the GPTs' dropout (default: the model's own)")
    p.add_argument("--zero", action="store_true",
                   help="under torchrun: the optimizer in torch.distributed.optim.ZeroRedundancyOptimizer")
    p.add_argument("--smoke", action="store_true",
                   help="tiny CPU run of the plumbing: device cpu, batch 2, 16x16 images for the ResNets, 2 warm-up steps, 2 windows of 1 step")
    args = p.parse_args()

    if args.smoke:
        args.device = "cpu"
        args.batch = args.batch or 2
        args.warmup, args.windows, args.steps, args.input_sets = 2, 2, 1, 2
        if not args.image_size and args.model != "fmnist_cnn":  # its classifier needs 28x28
            args.image_size = 16  # gpt2: a context of 16 tokens
    if not args.batch:
        args.batch = DEFAULT_BATCH[args.model]
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in ("eager", "compile")]
    if bad or not modes or args.batch < 1 or args.windows < 1:
        p.error(f"--modes takes eager and/or compile (got {args.modes!r}); --batch and --windows must be >= 1")
    return args, modes


def set_up_torch(torch, args):
    """The device (the local rank's GPU under torchrun) with the process group, cuDNN's benchmark
    and TF32 set and the versions printed; None (and an error RESULT line) without the GPU asked for."""
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(f"RESULT tool=torch model={args.model} batch={args.batch} dtype={args.dtype} mode={clean(args.modes)} "
              f"img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=cuda status=error "
              f"note=torch.cuda.is_available()_is_False", flush=True)
        return None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        torch.distributed.init_process_group("gloo" if dev.type == "cpu" else "nccl")
        if dev.type == "cuda":
            dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    if args.tf32 != "default":
        on = args.tf32 == "on"
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) on {where}; "
          f"tf32 matmul={torch.backends.cuda.matmul.allow_tf32} conv={torch.backends.cudnn.allow_tf32}; "
          f"cudnn.benchmark={torch.backends.cudnn.benchmark}", file=sys.stderr, flush=True)
    return dev


def run_and_report(torch, args, mode, dev, quiet):
    """One mode, its failure (OOM, a compile error) caught so that it does not hide the others; a
    human line on stderr, the RESULT line on stdout (rank 0 only). True when it ran ok."""
    try:
        res = run_mode(torch, args, mode, dev)
    except Exception as e:  # one mode's failure (OOM, a compile error) must not hide the others
        oom = type(e).__name__ == "OutOfMemoryError"
        res = error_result(args, mode, dev.type, "oom" if oom else "error", clean(f"{type(e).__name__}:{e}"))
        print(f"torch_train_bench: {args.model} {args.dtype} {mode}: {type(e).__name__}: {e}", file=sys.stderr,
              flush=True)
    finally:
        if mode == "compile":
            torch._dynamo.reset()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    print(f"{args.model} batch {args.batch} {args.dtype} {mode}: {res['img_s']} img/s, {res['step_ms']} ms/step, "
          f"peak {res['peak_bytes']} B, compile {res['compile_s']} s, windows {res.get('steps', '-')}, "
          f"spread {res.get('spread', '-')}: {res['status']}", file=sys.stderr, flush=True)
    if not quiet:
        print("RESULT " + " ".join(f"{k}={clean(v)}" for k, v in res.items()), flush=True)
    return res["status"] == "ok"


def main():
    args, modes = parse_args()
    import torch

    dev = set_up_torch(torch, args)
    if dev is None:
        return 1
    quiet = torch.distributed.is_initialized() and torch.distributed.get_rank() != 0
    failed = 0
    for mode in modes:
        failed += not run_and_report(torch, args, mode, dev, quiet)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
