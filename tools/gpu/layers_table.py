#!/usr/bin/env python3
"""layers_table.py: the per-layer table of a dptrain run's layers.json (cfg key profile.layers), for
tools/gpu/run_all.sh's profile step.

    layers_table.py LAYERS_JSON [--top N]

layers.json (issue 20 section 3; written by rank 0 at the end of the profile.layers window):
    {"steps": [A, B], "device": "cuda:0", "precision": "bf16", "step_ms": <mean whole-step ms>,
     "layers": [{"name", "type", "out_shape": [..], "fwd_ms", "bwd_ms", "fused": [..]}, ...],
     "other": {"loss_ms", "optimizer_ms", "comm_wait_ms", "data_wait_ms", "unattributed_ms"}}
Every time is a mean over the window's steps. Prints the N (default 15) layers with the most
forward + backward time (descending, ties by name), each with its share of the step, then what
the rest of the layers and the step's other parts took, and the accounting check (layers + other
against step_ms).

Standard library only. Exit status 0; 1 when the file is missing or not such a layers.json (the
message names the file and the field); 2 on a usage error.
"""
import argparse
import json
import sys

OTHER_KEYS = ("loss_ms", "optimizer_ms", "comm_wait_ms", "data_wait_ms", "unattributed_ms")


class Malformed(Exception):
    pass


def need(obj, key, kind, where):
    """obj[key] checked to be of the python type(s) kind; numbers must be finite."""
    if not isinstance(obj, dict) or key not in obj:
        raise Malformed(f"{where}: no '{key}'")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, kind):
        raise Malformed(f"{where}: '{key}' is {json.dumps(v)[:40]}, not {getattr(kind, '__name__', 'a number')}")
    if isinstance(v, float) and v != v:
        raise Malformed(f"{where}: '{key}' is NaN")
    return v


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise Malformed(f"cannot read it: {e.strerror}") from None
    except ValueError as e:
        raise Malformed(f"not JSON: {e}") from None
    num = (int, float)
    steps = need(doc, "steps", list, "top level")
    if len(steps) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps) or steps[0] > steps[1]:
        raise Malformed(f"top level: 'steps' is {steps}, not [A, B] with A <= B")
    need(doc, "device", str, "top level")
    need(doc, "precision", str, "top level")
    need(doc, "step_ms", num, "top level")
    layers = need(doc, "layers", list, "top level")
    for i, layer in enumerate(layers):
        where = f"layers[{i}]"
        need(layer, "name", str, where)
        where = f"layer '{layer['name']}'"
        need(layer, "type", str, where)
        need(layer, "out_shape", list, where)
        need(layer, "fwd_ms", num, where)
        need(layer, "bwd_ms", num, where)
        fused = layer.get("fused", [])
        if not isinstance(fused, list) or not all(isinstance(f, str) for f in fused):
            raise Malformed(f"{where}: 'fused' is not a list of layer names")
    other = need(doc, "other", dict, "top level")
    for k in OTHER_KEYS:
        need(other, k, num, "'other'")
    return doc


def pct(part, whole):
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "n/a"


def render(doc, top):
    step = float(doc["step_ms"])
    a, b = doc["steps"]
    n = b - a + 1
    layers = sorted(doc["layers"], key=lambda L: (-(L["fwd_ms"] + L["bwd_ms"]), L["name"]))
    shown = layers[:top]
    out = [f"per-layer time: steps {a}-{b} (means of {n} step{'s' if n != 1 else ''}), {doc['device']}, "
           f"{doc['precision']}: {step:.3f} ms a step; {len(shown)} of {len(layers)} layers, most time first"]
    head = ["layer", "type", "out shape", "fwd ms", "bwd ms", "total ms", "share", "fused"]
    rows = []
    for L in shown:
        tot = L["fwd_ms"] + L["bwd_ms"]
        rows.append([L["name"], L["type"], "x".join(str(d) for d in L["out_shape"]) or "-",
                     f"{L['fwd_ms']:.3f}", f"{L['bwd_ms']:.3f}", f"{tot:.3f}", pct(tot, step),
                     ",".join(L.get("fused", [])) or "-"])
    width = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    left = (0, 1, 2, 7)
    for r in [head] + rows:
        out.append("  ".join(c.ljust(width[i]) if i in left else c.rjust(width[i]) for i, c in enumerate(r)).rstrip())
    rest = layers[top:]
    rest_ms = sum(L["fwd_ms"] + L["bwd_ms"] for L in rest)
    if rest:
        out.append(f"the other {len(rest)} layers: {rest_ms:.3f} ms ({pct(rest_ms, step)})")
    o = doc["other"]
    out.append("other: " + ", ".join(f"{k[:-3].replace('_', ' ')} {o[k]:.3f} ms ({pct(o[k], step)})" for k in OTHER_KEYS))
    layer_ms = sum(L["fwd_ms"] + L["bwd_ms"] for L in layers)
    total = layer_ms + sum(o[k] for k in OTHER_KEYS)
    out.append(f"accounting: layers {layer_ms:.3f} + other {total - layer_ms:.3f} = {total:.3f} ms "
               f"against step {step:.3f} ms ({'adds up' if abs(total - step) <= 1e-3 * max(step, 1.0) else 'DOES NOT add up'})")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("layers_json")
    p.add_argument("--top", type=int, default=15, help="rows to show (default 15)")
    args = p.parse_args()
    if args.top < 1:
        p.error("--top must be at least 1")
    try:
        doc = load(args.layers_json)
    except Malformed as e:
        print(f"layers_table: {args.layers_json}: {e}", file=sys.stderr)
        return 1
    print(render(doc, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
