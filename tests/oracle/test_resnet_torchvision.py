"""dptrain's ResNet presets against torchvision itself.

For resnet18 and resnet50: the parameter count equals torchvision's (11,689,512 and 25,557,032),
the state-dict keys are torchvision's, in the same order, with the same shapes; the dptrain-
initialised weights load into torchvision.models.<name>() with strict=True; and in eval mode
torchvision's logits on dptrain's input equal dptrain's logits within 1e-4.
For cifar_resnet18, the same against torchvision's resnet18 with the CIFAR stem (3x3 conv1,
no max-pool), built here.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch
import torchvision
from safetensors.torch import load_file
from safetensors import safe_open

EXPECTED_PARAMS = {"resnet18": 11_689_512, "resnet50": 25_557_032}


def torchvision_model(preset, num_classes):
    if preset == "resnet18":
        return torchvision.models.resnet18(num_classes=num_classes)
    if preset == "resnet50":
        return torchvision.models.resnet50(num_classes=num_classes)
    if preset == "cifar_resnet18":
        m = torchvision.models.resnet18(num_classes=num_classes)
        m.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        m.maxpool = torch.nn.Identity()
        return m
    raise ValueError(preset)


def file_order(path):
    """Tensor names in the order of their data in the file (dptrain writes registration order)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return sorted(header, key=lambda k: header[k]["data_offsets"][0])


def check(build_dir, preset, size, num_classes, failures):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{preset}.safetensors")
        subprocess.run([os.path.join(build_dir, "tests", "resnet_dump"), preset, path, str(size), str(num_classes)],
                       check=True)
        tensors = load_file(path)
        with safe_open(path, "pt") as f:
            meta = f.metadata()
        names_in_file_order = file_order(path)
    x = tensors.pop("__input__")
    dp_logits = tensors.pop("__logits__")
    model = torchvision_model(preset, num_classes)
    sd = model.state_dict()
    n_params = sum(p.numel() for p in model.parameters())
    dp_params = int(meta["num_parameters"])
    if preset in EXPECTED_PARAMS and n_params != EXPECTED_PARAMS[preset]:
        failures.append(f"{preset}: torchvision has {n_params} parameters, expected {EXPECTED_PARAMS[preset]}")
    if dp_params != n_params:
        failures.append(f"{preset}: dptrain has {dp_params} parameters, torchvision {n_params}")
    tv_keys = list(sd.keys())
    dp_keys = [k for k in names_in_file_order if not k.startswith("__")]
    if dp_keys != tv_keys and set(dp_keys) == set(tv_keys):
        first = next(i for i, (a, b) in enumerate(zip(dp_keys, tv_keys)) if a != b)
        failures.append(f"{preset}: state-dict order differs at #{first}: dptrain {dp_keys[first]}, "
                        f"torchvision {tv_keys[first]}")
    if set(tensors.keys()) != set(tv_keys):
        failures.append(f"{preset}: key sets differ: only dptrain {sorted(set(tensors) - set(tv_keys))[:5]}, "
                        f"only torchvision {sorted(set(tv_keys) - set(tensors))[:5]}")
    for k in tv_keys:
        if k in tensors and tuple(tensors[k].shape) != tuple(sd[k].shape):
            failures.append(f"{preset}: {k} shape {tuple(tensors[k].shape)} vs torchvision {tuple(sd[k].shape)}")
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        failures.append(f"{preset}: load_state_dict(strict=True) failed: {e}")
        return
    model.eval()
    with torch.no_grad():
        tv_logits = model(x)
    err = (tv_logits - dp_logits).abs().max().item()
    scale = tv_logits.abs().max().item()
    print(f"{preset:16s} params {dp_params:>11,d} (torchvision {n_params:>11,d})  keys {len(tensors):4d}  "
          f"max |logit diff| {err:.2e} (max |logit| {scale:.2e})")
    if not err <= 1e-4:
        failures.append(f"{preset}: logits differ from torchvision by {err:.3e} > 1e-4")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    failures = []
    check(args.build_dir, "resnet18", 64, 1000, failures)
    check(args.build_dir, "resnet50", 64, 1000, failures)
    check(args.build_dir, "cifar_resnet18", 32, 10, failures)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all ResNet presets match torchvision")


if __name__ == "__main__":
    main()
