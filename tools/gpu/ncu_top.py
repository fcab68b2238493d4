#!/usr/bin/env python3
"""ncu_top.py: the kernels with the most GPU time in an Nsight Compute CSV, for tools/gpu/run_all.sh's
kernels step.

    ncu_top.py CSV [--top N] [--width W]

CSV is what `ncu --import REPORT.ncu-rep --csv --page details` prints for a report taken with
`--metrics gpu__time_duration.sum`: one row per (kernel launch, metric), with the columns "ID",
"Process ID", "Kernel Name", "Metric Name", "Metric Unit" and "Metric Value" among others (newer
ncu versions add rule columns; lines before the header, such as ==PROF== ones, are skipped).
Values may carry thousands separators ("1,234.5"); units are nsecond/usecond/msecond/second or
ns/us/ms/s. Launches are grouped by kernel name; prints the N (default 20) names with the most
total time (descending, ties by name): total ms, calls, mean us, share of all launches' time and
the name (cut to W characters, default 160, with "..." in the middle: the name's start and its
argument list's end both say which kernel it is).

Standard library only. Exit status 0; 1 when the file is missing, has no header or no
gpu__time_duration.sum row (the message says which); 2 on a usage error.
"""
import argparse
import csv
import sys

METRIC = "gpu__time_duration.sum"
TO_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "\u00b5s": 1e-3, "msecond": 1.0, "ms": 1.0,
         "second": 1e3, "s": 1e3}
NEEDED = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


class Unusable(Exception):
    pass


def parse_value(text, unit, where):
    factor = TO_MS.get(unit.strip())
    if factor is None:
        raise Unusable(f"{where}: unit '{unit}' of {METRIC} is not a time unit this script knows ({', '.join(TO_MS)})")
    try:
        return float(text.replace(",", "")) * factor
    except ValueError:
        raise Unusable(f"{where}: value '{text}' is not a number") from None


def read_launches(path):
    """[(launch key, kernel name, ms)] of every gpu__time_duration.sum row."""
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Unusable(f"cannot read it: {e.strerror}") from None
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise Unusable('no CSV header (a line starting with "ID",): not ncu --csv output')
    rows = csv.DictReader(lines[start:])
    missing = [c for c in NEEDED if c not in (rows.fieldnames or [])]
    if missing:
        raise Unusable(f"the header lacks {', '.join(missing)}")
    out = []
    for n, row in enumerate(rows, start=start + 2):
        if row.get("Metric Name") != METRIC:
            continue
        key = (row.get("Process ID", ""), row["ID"])
        out.append((key, row["Kernel Name"], parse_value(row["Metric Value"], row["Metric Unit"], f"line {n}")))
    if not out:
        raise Unusable(f"no {METRIC} rows (was the report taken with --metrics {METRIC}?)")
    return out


def cut(name, width):
    if len(name) <= width:
        return name
    head = (width - 3) * 2 // 3
    return name[:head] + "..." + name[len(name) - (width - 3 - head):]


def render(launches, top, width):
    per = {}
    for key, name, ms in launches:
        total, keys = per.setdefault(name, [0.0, set()])
        per[name][0] = total + ms
        keys.add(key)
    all_ms = sum(ms for _, _, ms in launches)
    n_launches = len({key for key, _, _ in launches})
    ranked = sorted(per.items(), key=lambda kv: (-kv[1][0], kv[0]))
    out = [f"kernels: {len(ranked)} distinct, {n_launches} launches, {all_ms:.3f} ms of GPU time in all "
           f"(Nsight Compute {METRIC}, kernels serialised); the {min(top, len(ranked))} with the most time:"]
    head = ["total ms", "calls", "mean us", "share", "kernel"]
    rows = [[f"{t:.3f}", str(len(k)), f"{1e3 * t / len(k):.1f}", f"{100.0 * t / all_ms:.1f}%" if all_ms > 0 else "n/a",
             cut(name, width)] for name, (t, k) in ranked[:top]]
    w = [max(len(r[i]) for r in [head] + rows) for i in range(4)]
    for r in [head] + rows:
        out.append("  ".join([c.rjust(w[i]) for i, c in enumerate(r[:4])] + [r[4]]))
    rest = ranked[top:]
    if rest:
        rest_ms = sum(t for _, (t, _) in rest)
        out.append(f"the other {len(rest)} kernels: {rest_ms:.3f} ms ({100.0 * rest_ms / all_ms:.1f}%)"
                   if all_ms > 0 else f"the other {len(rest)} kernels: {rest_ms:.3f} ms")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=20, help="kernels to show (default 20)")
    p.add_argument("--width", type=int, default=160, help="longest kernel name shown (default 160)")
    args = p.parse_args()
    if args.top < 1 or args.width < 20:
        p.error("--top must be at least 1 and --width at least 20")
    try:
        launches = read_launches(args.csv)
    except Unusable as e:
        print(f"ncu_top: {args.csv}: {e}", file=sys.stderr)
        return 1
    print(render(launches, args.top, args.width))
    return 0


if __name__ == "__main__":
    sys.exit(main())
