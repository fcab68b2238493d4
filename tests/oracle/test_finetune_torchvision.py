"""Fine-tuning from PyTorch weights: a torchvision resnet18 state_dict saved by PyTorch
(safetensors.torch.save_file, 1000 classes, BN running statistics made non-trivial) initialises
dptrain's resnet18 preset with num_classes = 3 and model.init_skip = ["fc.*"], the way a training
run does before its first step (tests/oracle/init_dump.cpp). Checked:
  - every tensor but fc.* equals PyTorch's bit for bit, fc.* keep dptrain's fresh initialisation
    (shape [3, 512], not PyTorch's);
  - in eval mode dptrain's logits equal torchvision's resnet18 whose fc is replaced by a
    Linear(512, 3) holding dptrain's fresh fc weights, within 1e-4;
  - without init_skip the class-count mismatch is refused, naming fc.weight and fc.bias.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
import torchvision
from safetensors.torch import load_file, save_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    failures = []
    tv = torchvision.models.resnet18()  # 1000 classes, random weights (no download)
    with torch.no_grad():
        for m in tv.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)
    sd = {k: v.contiguous() for k, v in tv.state_dict().items()}
    x = torch.randn(2, 3, 64, 64)
    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, "resnet18_torchvision.safetensors")
        save_file(sd, weights)
        save_file({"x": x}, os.path.join(tmp, "x.safetensors"))

        def dump(skip):
            cfg = os.path.join(tmp, "ft.cfg")
            with open(cfg, "w") as f:
                f.write(f'[run]\nseed = 3\n[model]\npreset = "resnet18"\nnum_classes = 3\n'
                        f'init = "{weights}"\n' + (f'init_skip = ["fc.*"]\n' if skip else ""))
            out = os.path.join(tmp, "out.safetensors")
            r = subprocess.run([os.path.join(args.build_dir, "tests", "init_dump"), cfg,
                                os.path.join(tmp, "x.safetensors"), out], capture_output=True, text=True)
            return r, (load_file(out) if r.returncode == 0 else None)

        r, got = dump(skip=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            sys.exit(1)
        print(r.stdout.strip())
        dp_logits = got.pop("__logits__")
        for k, v in sd.items():
            if k.startswith("fc."):
                continue
            if k not in got or not torch.equal(got[k], v):
                failures.append(f"{k}: not PyTorch's tensor after model.init")
        if tuple(got["fc.weight"].shape) != (3, 512) or tuple(got["fc.bias"].shape) != (3,):
            failures.append(f"fc: shapes {tuple(got['fc.weight'].shape)}, {tuple(got['fc.bias'].shape)}")
        if got["fc.weight"].abs().max().item() == 0:
            failures.append("fc.weight is all zeros: not a fresh initialisation")
        # torchvision with dptrain's fresh head.
        tv.fc = torch.nn.Linear(512, 3)
        with torch.no_grad():
            tv.fc.weight.copy_(got["fc.weight"])
            tv.fc.bias.copy_(got["fc.bias"])
        tv.eval()
        with torch.no_grad():
            want = tv(x)
        err = (want - dp_logits).abs().max().item()
        print(f"resnet18 fine-tune init: max |logit diff| {err:.2e} (max |logit| {want.abs().max().item():.2e})")
        if not err <= 1e-4:
            failures.append(f"logits differ from torchvision's by {err:.3e} > 1e-4")

        r, _ = dump(skip=False)
        if r.returncode == 0 or "'fc.weight': the model has f32[3, 512], the file f32[1000, 512]" not in r.stderr \
                or "'fc.bias': the model has f32[3], the file f32[1000]" not in r.stderr:
            failures.append(f"without init_skip: expected the fc mismatch error, got rc {r.returncode}: {r.stderr}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("fine-tuning from a torchvision state_dict matches torchvision")


if __name__ == "__main__":
    main()
