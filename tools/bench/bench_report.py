#!/usr/bin/env python3
"""The pure parts of tools/bench/gpu_vs_torch.sh: read a dptrain run, print the comparison table.

    bench_report.py dptrain RUN_DIR --model M --batch B --dtype D [--input I] [--rc RC] [--variant V --log LOG]
        Reads RUN_DIR/metrics.jsonl and prints one RESULT line (the format torch_train_bench.py
        prints) for the dptrain run, mode=I: "resident" (default: the batches made on the GPU,
        data.synthetic_device = "cuda", as torch's resident inputs: the judged figure) or "loader"
        (fed by dptrain's CPU loader and input pipeline: end to end). img_s = median samples_per_s of the train windows after the
        first --skip-frac of the steps (warm-up: cuDNN algorithm search, pool growth), step_ms =
        median step_time_s of the same windows, peak_bytes = the "device" line's
        peak_device_memory_bytes. --rc is dptrain's exit status: 124/137/143 (time box) with
        some windows gives status=partial, other non-zero ones status=error; 2 (a config error)
        with "unknown key 'K'" in --log gives status=unknown_key note=K: this dptrain build does
        not have the variant's key. --variant labels the line (variant=V; default "-").
    bench_report.py table RESULTS_FILE [--variants SPEC]
        Prints the table of every RESULT line in the file (other lines are ignored), one row per
        (model, batch, dtype, variant) in order of first appearance: dptrain with resident inputs
        (the judged figure) against torch eager and torch.compile, and beside it dptrain end to end
        (its CPU loader; a dptrain line with mode "-", written before the two were told apart, is
        end to end too); what each variant sets (from SPEC, the VARIANTS string) and the ResNet-50
        bf16 target line of every such row (issue 21: >= 1.0x eager and peak memory <= torch's;
        aim >= 1.2x and >= torch.compile).
    bench_report.py variants SPEC
        Checks SPEC, "label:key=v,key=v;label2@gpt2:key=v" (tools/bench/gpu_vs_torch.sh's VARIANTS),
        and prints one line per variant: the label, the models it is for ("*": gpu_vs_torch.sh's
        VARIANT_MODELS; "label@m1+m2": those models' cases only), then each key=value, separated
        by spaces. A label is letters, digits, '_', '.', '-'; a model is lowercase letters,
        digits and '_'; a key is section.key; a value has no spaces
        or ';', and a ',' inside a value is kept when what follows it is not "section.key="
        (so data.synthetic_shape=[3,224,224] works). Exit 2 with the reason when SPEC is malformed.

Standard library only (runs with any python3). Exit status 0, 1 when the run has no train
window (dptrain) or the file has no RESULT line (table), 2 on a usage error or a malformed SPEC.
"""
import argparse
import json
import os
import re
import statistics
import sys

TARGET_MODEL, TARGET_DTYPE = "resnet50", "bf16"
# Issue 21's targets: >= 1.0x torch eager AMP channels_last with peak memory <= torch's; aim >= 1.2x
# and >= torch.compile (this run's, else the 6,618 img/s it reached on the H200 of 2026-11-26).
TARGET_NEED, TARGET_AIM, TARGET_COMPILE_IMG_S = 1.0, 1.2, 6618.0
INPUTS = ("resident", "loader")
TIMEOUT_RCS = (124, 137, 143)
CONFIG_ERROR_RC = 2  # dptrain's exit status for a config or input error
LABEL = re.compile(r"^[A-Za-z0-9_.-]+$")
MODEL = re.compile(r"^[a-z0-9_]+$")
SETTING = re.compile(r"^([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)=(\S+)$")


def parse_result(line):
    """'RESULT k=v k=v ...' -> dict, or None."""
    parts = line.split()
    if not parts or parts[0] != "RESULT":
        return None
    out = {}
    for p in parts[1:]:
        k, sep, v = p.partition("=")
        if sep:
            out[k] = v
    return out


def clean(v):
    """A RESULT value: no spaces or '=' (the line is split on both)."""
    return "_".join(str(v).split()).replace("=", ":") or "-"


def num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x else None  # NaN is no number


class BadSpec(ValueError):
    pass


def parse_variants(spec):
    """'label:key=v,key=v;label2@m1+m2:key=v' -> [(label, models, [(key, value), ...]), ...] in
    order; models: the model names after '@', or None (no restriction)."""
    out = []
    for part in spec.split(";"):
        part = part.strip()
        if not part:
            continue
        head, sep, body = part.partition(":")
        label, at, model_list = head.strip().partition("@")
        if not sep or not LABEL.match(label):
            raise BadSpec(f"'{part}': want label:key=value,... with a label of letters, digits, '_', '.', '-'")
        models = model_list.split("+") if at else None
        if models is not None and not all(MODEL.match(m) for m in models):
            raise BadSpec(f"'{part}': want label@model+model:... with models of lowercase letters, digits, '_'")
        if label == "-" or label in [v[0] for v in out]:
            raise BadSpec(f"label '{label}' is {'reserved (the base row)' if label == '-' else 'given twice'}")
        # Split on the commas that start a new section.key=; others belong to a value ([3,224,224]).
        items = re.split(r",(?=\s*[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*=)", body)
        sets = []
        for item in items:
            m = SETTING.match(item.strip())
            if not m:
                raise BadSpec(f"variant '{label}': '{item.strip()}' is not section.key=value (no spaces)")
            if m.group(1) in [k for k, _ in sets]:
                raise BadSpec(f"variant '{label}': {m.group(1)} is set twice")
            sets.append((m.group(1), m.group(2)))
        out.append((label, models, sets))
    return out


def variants_cmd(args):
    try:
        vs = parse_variants(args.spec)
    except BadSpec as e:
        print(f"bench_report: VARIANTS: {e}", file=sys.stderr)
        return 2
    for label, models, sets in vs:
        print(" ".join([label, "+".join(models) if models else "*"] + [f"{k}={v}" for k, v in sets]))
    return 0


def unknown_key(log):
    """The key of dptrain's "unknown key 'K'" error in the log, or None."""
    try:
        with open(log, errors="replace") as f:
            m = re.search(r"unknown key '([^']+)'", f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def dptrain_result(args):
    path = os.path.join(args.run_dir, "metrics.jsonl")
    train, device = [], None
    try:
        with open(path) as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if d.get("split") == "train" and num(d.get("samples_per_s")) is not None:
                    train.append(d)
                elif d.get("split") == "device":
                    device = d
    except OSError as e:
        train, note = [], f"no_metrics:{e.strerror}"
    else:
        note = "-"
    res = dict(tool="dptrain", model=args.model, batch=args.batch, dtype=args.dtype, mode=args.input, variant=args.variant,
               img_s="-", step_ms="-", peak_bytes="-", reserved_bytes="-", compile_s="-", device="-", status="error",
               note=note)
    if device:
        for src, dst in (("peak_device_memory_bytes", "peak_bytes"), ("reserved_high_bytes", "reserved_bytes")):
            if num(device.get(src)) is not None:
                res[dst] = str(int(num(device[src])))
    if train:
        last = max(int(d.get("step", 0)) for d in train)
        skip = args.skip_frac * last
        used = [d for d in train[1:] if int(d.get("step", 0)) > skip] or train[-1:]
        res["img_s"] = f"{statistics.median(num(d['samples_per_s']) for d in used):.1f}"
        st = [num(d.get("step_time_s")) for d in used if num(d.get("step_time_s")) is not None]
        if st:
            res["step_ms"] = f"{1e3 * statistics.median(st):.3f}"
        res["steps"] = str(last)
        res["windows"] = str(len(used))
        if args.rc == 0:
            res["status"] = "ok"
        elif args.rc in TIMEOUT_RCS:
            res["status"], res["note"] = "partial", f"time_box_hit_at_step_{last}"
        else:
            res["note"] = f"exit_status_{args.rc}"
        if len(used) < 3 and res["status"] == "ok":
            res["note"] = f"only_{len(used)}_window(s)_after_warm-up"
    elif args.rc == CONFIG_ERROR_RC and args.log and unknown_key(args.log):
        res["status"], res["note"] = "unknown_key", unknown_key(args.log)
    elif res["note"] == "-":
        res["note"] = f"no_train_lines_exit_status_{args.rc}"
    print("RESULT " + " ".join(f"{k}={clean(v)}" for k, v in res.items()))
    return 0 if train else 1


def cell_img(r):
    """An img/s cell: the number (a '*' after a partial one), else the status, else n/a."""
    if r is None:
        return "n/a"
    x = num(r.get("img_s"))
    if x is None:
        return r.get("status", "n/a")
    return f"{x:.0f}" + ("*" if r.get("status") == "partial" else "")


def cell_ratio(a, b):
    x, y = num(a.get("img_s")) if a else None, num(b.get("img_s")) if b else None
    return f"{x / y:.2f}x" if x is not None and y else "n/a"


def cell_mib(r):
    x = num(r.get("peak_bytes")) if r else None
    return f"{x / 2**20:.0f}" if x is not None else "n/a"


def table(args):
    variants = []
    if args.variants:
        try:
            variants = parse_variants(args.variants)
        except BadSpec as e:
            print(f"bench_report: VARIANTS: {e}", file=sys.stderr)
            return 2
    rows, order = {}, []
    with open(args.results) as f:
        for line in f:
            r = parse_result(line.strip())
            if not r or "model" not in r:
                continue
            # A variant is a dptrain-only row: the torch numbers are those of its base row.
            key = (r.get("model"), r.get("batch"), r.get("dtype"), r.get("variant", "-"))
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key][slot_of(r)] = r  # a later line for the same slot replaces an earlier one
    if not order:
        print(f"bench_report: no RESULT lines in {args.results}", file=sys.stderr)
        return 1
    head = ["model", "batch", "dtype", "variant", "dptrain img/s", "eager img/s", "ratio", "compile img/s", "ratio",
            "e2e img/s", "e2e ratio", "dptrain MiB", "torch MiB"]
    body = []
    for key in order:
        d, e, c = torch_slots(rows, key)
        e2e = rows[key].get("e2e")
        body.append([key[0], key[1], key[2], key[3], cell_img(d), cell_img(e), cell_ratio(d, e), cell_img(c),
                     cell_ratio(d, c), cell_img(e2e) if e2e else "-", cell_ratio(e2e, e) if e2e else "-",
                     cell_mib(d), cell_mib(e)])
    width = [max(len(str(row[i])) for row in [head] + body) for i in range(len(head))]
    for row in [head] + body:
        cells = [str(v).ljust(width[i]) if i in (0, 2, 3) else str(v).rjust(width[i]) for i, v in enumerate(row)]
        print("  ".join(cells).rstrip())
    print("dptrain: its batches made on the GPU (data.synthetic_device = cuda), as torch's inputs resident on the GPU: "
          "the judged figure; e2e: fed by dptrain's CPU loader and input pipeline (-: not run)")
    print("ratio: dptrain img/s / torch img/s, same model, batch and dtype (torch: AMP + channels_last for "
          "bf16/fp16, data resident on the GPU; fp32: PyTorch's TF32 default, dptrain train.tf32 = conv)")
    print("MiB: peak allocated (dptrain, the judged run: the pool's used-high; torch: eager max_memory_allocated); "
          "*: partial (a time box ended the run)")
    for line in variant_lines(variants, rows, order):
        print(line)
    print(target_line(rows, order))
    return 0


def slot_of(r):
    """Where a RESULT line goes in its row: dptrain (resident inputs), e2e (dptrain, loader), or torch's mode."""
    if r.get("tool") != "dptrain":
        return r.get("mode", "-")
    return "dptrain" if r.get("mode") == "resident" else "e2e"


def torch_slots(rows, key):
    """(dptrain, eager, compile) of a row; a variant row takes torch's from its base row."""
    slots = rows[key]
    base = rows.get(key[:3] + ("-",), {})
    return slots.get("dptrain"), slots.get("eager", base.get("eager")), slots.get("compile", base.get("compile"))


def variant_lines(variants, rows, order):
    """What each variant sets, and which ones this dptrain build rejected."""
    out = []
    measured = {k[3] for k in order}
    for label, models, sets in variants:
        only = f" ({', '.join(models)} only)" if models else ""
        text = f"variant {label}{only}: " + " ".join(f"{k}={v}" for k, v in sets)
        rejected = sorted({r["dptrain"].get("note", "?") for k, r in rows.items()
                           if k[3] == label and r.get("dptrain", {}).get("status") == "unknown_key"})
        if rejected:
            text += f" (this dptrain build does not know {', '.join(rejected)}: unknown key)"
        elif label not in measured:
            text += " (not run)"
        out.append(text)
    return out


def target_line(rows, order):
    keys = [k for k in order if k[0] == TARGET_MODEL and k[2] == TARGET_DTYPE]
    want = (f"need dptrain >= {TARGET_NEED:.1f}x torch eager AMP channels_last and peak memory <= torch's, aim >= "
            f"{TARGET_AIM:.1f}x and >= torch.compile")
    if not keys:
        return (f"target ({TARGET_MODEL} {TARGET_DTYPE}): not measured in this run ({want}, "
                f"{TARGET_COMPILE_IMG_S:.0f} img/s on the H200)")
    out = []
    for key in keys:
        d, e, c = torch_slots(rows, key)
        x, y = num(d.get("img_s")) if d else None, num(e.get("img_s")) if e else None
        which = f"batch {key[1]}" + (f", variant {key[3]}" if key[3] != "-" else "")
        if x is None or not y:
            out.append(f"target ({TARGET_MODEL} {TARGET_DTYPE} {which}): n/a, "
                       f"dptrain {cell_img(d)}, eager {cell_img(e)} ({want})")
            continue
        ratio = x / y
        mine, theirs = num(d.get("peak_bytes")), num(e.get("peak_bytes"))
        misses = [] if ratio >= TARGET_NEED else ["speed"]
        if mine is not None and theirs is not None:
            memory = f"peak {cell_mib(d)} vs {cell_mib(e)} MiB"
            if mine > theirs:
                misses.append("memory")
        else:
            memory = "peak memory n/a"
        need = "NOT MET on " + " and ".join(misses) if misses else "MET"
        if not misses and (mine is None or theirs is None):
            need = "MET on speed, memory not measured"
        compile_x = num(c.get("img_s")) if c else None
        bar, where = ((compile_x, "in this run") if compile_x is not None else
                      (TARGET_COMPILE_IMG_S, "on the H200 of 2026-11-26, not measured here"))
        aim = "reached" if ratio >= TARGET_AIM and x >= bar else "not reached"
        out.append(f"target ({TARGET_MODEL} {TARGET_DTYPE} {which}): dptrain {x:.0f} img/s = {ratio:.2f}x "
                   f"eager {y:.0f} img/s, {memory}: {need} ({want}: aim {aim}; torch.compile {bar:.0f} img/s "
                   f"{where})")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dptrain", help="RESULT line of one dptrain run directory")
    d.add_argument("run_dir")
    d.add_argument("--model", required=True)
    d.add_argument("--batch", required=True)
    d.add_argument("--dtype", required=True)
    d.add_argument("--input", choices=INPUTS, default="resident",
                   help="resident: batches made on the GPU (the judged figure); loader: end to end")
    d.add_argument("--rc", type=int, default=0, help="dptrain's exit status")
    d.add_argument("--skip-frac", type=float, default=0.2, help="leave out windows ending in this first share")
    d.add_argument("--variant", default="-", help="the variant's label (default -: the base run)")
    d.add_argument("--log", help="dptrain's console log: names the key of an 'unknown key' error")
    t = sub.add_parser("table", help="the comparison table of a file of RESULT lines")
    t.add_argument("results")
    t.add_argument("--variants", default="", help="the VARIANTS string: what each variant sets")
    v = sub.add_parser("variants", help="check a VARIANTS string; one line per variant")
    v.add_argument("spec")
    args = p.parse_args()
    if args.cmd == "variants":
        return variants_cmd(args)
    if args.cmd == "dptrain" and args.variant != "-" and not LABEL.match(args.variant):
        p.error(f"--variant '{args.variant}': letters, digits, '_', '.', '-'")
    return dptrain_result(args) if args.cmd == "dptrain" else table(args)


if __name__ == "__main__":
    sys.exit(main())
