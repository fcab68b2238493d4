#!/usr/bin/env python3
"""Oracle: runtime/safetensors against Hugging Face's `safetensors` library, both directions.

1. The C++ helper (tests/oracle/safetensors_dump.cpp) writes known values in every dtype plus
   metadata; Python opens the file with safetensors.numpy / safe_open and checks every value
   bit for bit, and the metadata.
2. Python writes a file with safetensors.torch.save_file; the helper reads it back and prints
   it as JSON; Python checks every value bit for bit, the metadata and the file order.

Run by ctest as: python test_safetensors_py.py --build-dir <build>. Exits non-zero on failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file as torch_save_file

failures = []


def check(cond, what):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def cxx_to_python(helper, tmp):
    print("C++ writes, Python reads")
    path = os.path.join(tmp, "from_cxx.safetensors")
    subprocess.run([helper, "write", path], check=True)
    check(not os.path.exists(path + ".tmp"), "no temporary file left behind")

    inf, nan = np.float32(np.inf), np.float32(np.nan)
    want = {
        "f64": np.array([[1.0 / 3.0, -1e-300], [6.02214076e23, -0.0]], dtype=np.float64),
        "i64": np.array([np.iinfo(np.int64).min, -1, 2**53], dtype=np.int64),
        "f32": np.array([[0.1, -2.5, 1e-45], [inf, nan, -0.0]], dtype=np.float32),
        "i32": np.array([-7, 0, 2147483647, -2147483648], dtype=np.int32).reshape(2, 1, 2),
        "f16": np.array([1.0, -2.0, 0.5, 65504.0, 2.0**-24, -np.inf], dtype=np.float16),
        "u8": np.array([0, 1, 127, 128, 255], dtype=np.uint8),
        "scalar": np.array(42.0, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    # numpy has no bfloat16: numpy's loader cannot return it, so bf16 is read through torch.
    want_bf16 = torch.tensor([1.0, -2.0, 0.5, 3.140625, 2.0**-133], dtype=torch.bfloat16)

    with safe_open(path, framework="np") as f:
        meta = f.metadata()
        keys = list(f.keys())
    check(meta == {"format": "dptrain-test/1", "quoted": 'a "b" \\ c\nnext line\ttab',
                   "unicode": "r\u00e9sum\u00e9 \u2713", "empty": ""}, f"metadata {meta!r}")
    check(sorted(keys) == sorted(list(want) + ["bf16"]), f"tensor names {keys}")

    with safe_open(path, framework="pt") as f:
        got_bf16 = f.get_tensor("bf16")
        got_pt_f32 = f.get_tensor("f32")
    check(got_bf16.dtype == torch.bfloat16 and torch.equal(got_bf16.view(torch.int16), want_bf16.view(torch.int16)),
          f"bf16 via torch: {got_bf16.tolist()}")
    check(same_bits(got_pt_f32.numpy(), want["f32"]), "f32 via torch")

    # safetensors.numpy.load_file would load every tensor and fails on bf16; read one by one.
    with safe_open(path, framework="np") as f:
        numpy_side = {k: f.get_tensor(k) for k in want if k in keys}
    for name, w in want.items():
        got = numpy_side.get(name)
        check(got is not None and same_bits(got, w), f"{name} {w.dtype} {list(w.shape)}: {None if got is None else got.tolist()}")


def python_to_cxx(helper, tmp):
    print("Python writes, C++ reads")
    path = os.path.join(tmp, "from_py.safetensors")
    g = torch.Generator().manual_seed(1234)
    tensors = {
        "conv1.weight": torch.randn(4, 3, 3, 3, generator=g),
        "fc.bias": torch.randn(7, generator=g, dtype=torch.float64),
        "half": torch.randn(5, generator=g).to(torch.float16),
        "brain": torch.randn(2, 3, generator=g).to(torch.bfloat16),
        "steps": torch.tensor([0, -5, 2**40], dtype=torch.int64),
        "labels": torch.tensor([[1, 2], [-3, 2**31 - 1]], dtype=torch.int32),
        "mask": torch.tensor([0, 255, 17], dtype=torch.uint8),
        "scalar": torch.tensor(3.5),
    }
    meta = {"format": "pt", "epoch": "3", "note": "written by safetensors " + __import__("safetensors").__version__}
    torch_save_file(tensors, path, metadata=meta)
    out = subprocess.run([helper, "read", path], check=True, capture_output=True, text=True).stdout
    got = json.loads(out)

    check(got["metadata"] == meta, f"metadata {got['metadata']!r}")
    # File order per the C++ reader must be the order of data offsets in the header.
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
    by_offset = sorted((v["data_offsets"][0], k) for k, v in header.items() if k != "__metadata__")
    check(got["names"] == [k for _, k in by_offset], f"names in data order {got['names']}")

    st_name = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}
    for name, t in tensors.items():
        e = got["tensors"].get(name)
        if e is None:
            check(False, f"{name} missing from the C++ reading")
            continue
        if t.dtype in (torch.float16, torch.bfloat16):
            want_vals = (t.view(torch.int16).to(torch.int32) & 0xFFFF).flatten().tolist()  # raw bits
            got_vals = e["data"]
        elif t.dtype in (torch.float32, torch.float64):
            np_dt = np.float32 if t.dtype == torch.float32 else np.float64
            want_vals = t.flatten().numpy()
            got_vals = np.array(e["data"], dtype=np_dt)  # JSON doubles round-trip exactly
            want_vals, got_vals = want_vals.tobytes(), got_vals.tobytes()
        else:
            want_vals, got_vals = t.flatten().tolist(), e["data"]
        ok = e["dtype"] == st_name[t.dtype] and e["shape"] == list(t.shape) and want_vals == got_vals
        check(ok, f"{name} {e['dtype']} {e['shape']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    helper = os.path.join(args.build_dir, "tests", "safetensors_dump")
    if not os.access(helper, os.X_OK):
        print(f"helper {helper} not built: run `ninja -C {args.build_dir} safetensors_dump`")
        return 1
    with tempfile.TemporaryDirectory(prefix="dp_st_oracle_") as tmp:
        cxx_to_python(helper, tmp)
        python_to_cxx(helper, tmp)
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all safetensors interoperability checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
