"""ONNX node conformance: how many of ONNX's own operator cases hl passes, per operator.

Runs every case onnx.backend.test collects (each operator on ONNX's inputs, compared with
ONNX's expected outputs at the case's own tolerance: tests/onnx/conformance.py) through
hl.onnx.Backend, and prints passed/total overall, the failures by reason category and a
table per operator.

    python bench/onnx_conformance.py [--ops Conv,Relu] [--ort] [--failures] [--slowest 10]
    python bench/onnx_conformance.py --write-exclusions   # rewrite the xfail list
    python bench/onnx_conformance.py --markdown --ort     # the table for docs/onnx.md

--ort runs the same cases through onnxruntime's backend for comparison (both counts side by
side; onnxruntime lags onnx's newest opset, so it fails some cases for that alone).
--write-exclusions rewrites tests/onnx/conformance_exclusions.txt from this run's failures,
keeping hand-written reasons of cases that still fail in the same category.
"""
import argparse
import collections
import datetime
import faulthandler
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import setup  # noqa: E402

setup(0)  # puts the repo root on sys.path: hl and tests.onnx.conformance from the checkout
import onnx  # noqa: E402

from tests.onnx import conformance as conf  # noqa: E402


def run_all(names, backend, label):
    """{name: None or error line} and {name: seconds}, printing progress to stderr."""
    results, times = {}, {}
    t_start = time.perf_counter()
    for i, name in enumerate(names):
        t0 = time.perf_counter()
        results.update(conf.run_named([name], backend))
        times[name] = time.perf_counter() - t0
        if (i + 1) % 200 == 0:
            print(f"  {label}: {i + 1}/{len(names)} cases", file=sys.stderr)
    print(f"  {label}: {len(names)} cases in {time.perf_counter() - t_start:.1f} s",
          file=sys.stderr)
    return results, times


def ort_backend():
    import onnxruntime
    import onnxruntime.backend
    onnxruntime.set_default_logger_severity(4)  # quiet: its failures are counted, not logged
    return onnxruntime.backend


def per_op(cases, names, *results):
    """{op: [total, cases failing for a dtype hl cannot hold, passed in each of results...]}
    (the dtype count from the first result, hl's)."""
    table = {}
    for name in names:
        row = table.setdefault(conf.op_of(cases[name]), [0, 0] + [0] * len(results))
        row[0] += 1
        error = results[0][name]
        row[1] += error is not None and conf.classify(error)[0] == conf.DTYPE
        for j, res in enumerate(results):
            row[2 + j] += res[name] is None
    return table


def supported_rows(table):
    """(domain, op) for every operator hl imports, default domain first."""
    import hl.onnx.ops as ops
    domains = sorted({d for d, _ in ops.IMPORTERS}, key=lambda d: (d != "", d))
    return [(d, op) for d in domains for op in ops.supported_ops(d)]


def print_markdown(table, ort, ops=None):
    """The supported-operator table for docs/onnx.md (only ``ops`` when given)."""
    print("| Operator | hl passes | cases | of which dtypes hl cannot hold |"
          + (" onnxruntime passes |" if ort else ""))
    print("|---|---:|---:|---:|" + ("---:|" if ort else ""))
    for domain, op in supported_rows(table):
        if ops is not None and op not in ops:
            continue
        name = op if not domain else f"{op} ({domain})"
        row = table.get(op)
        if row is None:
            print(f"| {name} | - | 0 | - |" + (" - |" if ort else ""))
        else:
            print(f"| {name} | {row[2]} | {row[0]} | {row[1]} |" + (f" {row[3]} |" if ort else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="only these operator types (comma-separated)")
    p.add_argument("--ort", action="store_true", help="also run the cases through onnxruntime")
    p.add_argument("--failures", action="store_true", help="print every failing case")
    p.add_argument("--slowest", type=int, default=0, help="print the N slowest cases")
    p.add_argument("--markdown", action="store_true",
                   help="print the supported-operator table as markdown")
    p.add_argument("--write-exclusions", action="store_true",
                   help="rewrite tests/onnx/conformance_exclusions.txt from the failures")
    args = p.parse_args()
    if args.write_exclusions and args.ops:
        p.error("--write-exclusions needs every case: drop --ops")
    faulthandler.enable()  # a crash in the C core names the case's frame, at least

    import hl.onnx
    cases = conf.all_cases()
    ops = set(args.ops.split(",")) if args.ops else None
    names = [n for n, c in cases.items() if ops is None or conf.op_of(c) in ops]
    hl_res, hl_times = run_all(names, hl.onnx.Backend, "hl")
    ort_res = run_all(names, ort_backend(), "onnxruntime")[0] if args.ort else None
    results = [hl_res] + ([ort_res] if ort_res is not None else [])
    table = per_op(cases, names, *results)

    hl_pass = sum(v is None for v in hl_res.values())
    print(f"onnx {onnx.__version__} node conformance cases, {datetime.date.today()}")
    print(f"hl passes {hl_pass}/{len(names)}")
    if ort_res is not None:
        ort_pass = sum(v is None for v in ort_res.values())
        import onnxruntime
        print(f"onnxruntime {onnxruntime.__version__} passes {ort_pass}/{len(names)}")

    failures = {n: v for n, v in hl_res.items() if v is not None}
    categories = collections.Counter(conf.classify(v)[0] for v in failures.values())
    print("\nhl failures by category:")
    for category, count in categories.most_common():
        print(f"  {count:5d}  {category}")
    missing = collections.Counter(conf.op_of(cases[n]) for n, v in failures.items()
                                  if conf.classify(v)[0] == conf.UNSUPPORTED)
    if missing:
        print("\noperators hl lacks, by cases: " +
              ", ".join(f"{op} {k}" for op, k in missing.most_common()))

    if args.markdown:
        print()
        print_markdown(table, ort_res is not None, ops)
    else:
        ort = ort_res is not None
        print(f"\n{'operator':34s} {'hl':>5s} {'cases':>6s} {'dtype':>6s}"
              + (f" {'ort':>5s}" if ort else "") + "   (dtype: cases hl cannot hold)")
        for op in sorted(table):
            row = table[op]
            print(f"{op:34s} {row[2]:5d} {row[0]:6d} {row[1]:6d}" + (f" {row[3]:5d}" if ort else ""))

    if args.failures:
        print()
        for n in sorted(failures):
            print(f"FAIL {n}: {failures[n][:240]}")
    if args.slowest:
        print(f"\n{args.slowest} slowest cases (s):")
        for n, t in sorted(hl_times.items(), key=lambda kv: -kv[1])[:args.slowest]:
            print(f"  {t:7.3f}  {n}")

    if args.write_exclusions:
        old = conf.read_exclusions()
        entries, dropped = conf.merge_exclusions(failures, old)
        conf.write_exclusions(entries)
        print(f"\nwrote {len(entries)} exclusions to {os.path.relpath(conf.EXCLUSIONS)}"
              f" ({len(set(old) - set(entries))} no longer fail)")
        for n in dropped:
            print(f"  hand-written reason dropped (category changed): {n}: {old[n][1]}")


if __name__ == "__main__":
    main()
