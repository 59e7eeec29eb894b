"""Runs Apache SINGA's own Python tests against hl.singa, with only their imports rewritten.

    python tests/singa/run_singa_tests.py /path/to/singa-checkout [-k EXPR] [--tests NAME ...]

SINGA's tests are never part of this repository and nothing is fetched: the script copies
``test/python/<name>.py`` (and its ``cuda_helper.py``) from the checkout you point it at into a
temporary folder, rewrites ``from singa import X`` / ``import singa`` to hl.singa, and runs them
with pytest. It prints one line per test (passed / failed / skipped, with the first line of
the failure) and a summary per file; GPU-only tests skip because hl.singa.singa_wrap.USE_CUDA
is False, and count apart from the CPU tests.

The only other rewrite: ``from onnx import (..., mapping, ...)`` loses ``mapping`` (a module
newer onnx releases removed; test_onnx.py imports it and never uses it).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

DEFAULT_TESTS = ["test_tensor", "test_operation", "test_model", "test_opt", "test_initializer",
                 "test_onnx"]


def rewrite(source):
    """SINGA's imports pointed at hl.singa; nothing else changes."""
    source = re.sub(r"^(\s*)from singa(\.[\w.]+)? import", r"\1from hl.singa\2 import", source,
                    flags=re.M)
    source = re.sub(r"^(\s*)import singa(\.[\w.]+)?( as (\w+))?\s*$",
                    lambda m: f"{m.group(1)}import hl.singa{m.group(2) or ''} as "
                              f"{m.group(4) or 'singa'}", source, flags=re.M)

    def drop_mapping(m):
        names = [n.strip() for n in m.group(1).split(",") if n.strip() and n.strip() != "mapping"]
        return "from onnx import (" + ", ".join(names) + ")"
    return re.sub(r"from onnx import \(([^)]*)\)", drop_mapping, source)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", help="a SINGA source checkout (holding test/python/)")
    ap.add_argument("--tests", nargs="*", default=DEFAULT_TESTS)
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("-q", action="store_true", help="print only failures and the summary")
    args = ap.parse_args(argv)
    src = os.path.join(args.checkout, "test", "python")
    if not os.path.isdir(src):
        sys.exit(f"{src} does not exist: point the script at a SINGA checkout")
    tmp = tempfile.mkdtemp(prefix="hl_singa_tests_")
    try:
        for name in args.tests + ["cuda_helper"]:
            with open(os.path.join(src, name + ".py"), encoding="utf-8") as f:
                text = rewrite(f.read())
            with open(os.path.join(tmp, name + ".py"), "w", encoding="utf-8") as f:
                f.write(text)
        xml = os.path.join(tmp, "report.xml")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", tmp,
               "-o", "addopts=", "--junitxml", xml] + [n + ".py" for n in args.tests]
        if args.k:
            cmd += ["-k", args.k]
        env = dict(os.environ, HL_SINGA_QUIET="1")
        subprocess.run(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return report(xml, args.q)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(xml, quiet):
    totals = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        cls = case.get("classname", "")
        file = cls.split(".")[0]
        name = f"{cls.split('.')[-1]}.{case.get('name')}"
        status, why = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                status = "skipped" if tag == "skipped" else "failed"
                msg = (el.get("message") or el.text or "").strip().splitlines()
                why = msg[0][:160] if msg else ""
                break
        t = totals.setdefault(file, {"passed": 0, "failed": 0, "skipped": 0})
        t[status] += 1
        if not quiet or status == "failed":
            print(f"{status:8s} {file}::{name}" + (f"  -- {why}" if why else ""))
    print()
    cpu_pass = cpu_all = 0
    for file, t in sorted(totals.items()):
        cpu = t["passed"] + t["failed"]
        cpu_pass += t["passed"]
        cpu_all += cpu
        print(f"{file:18s} CPU tests {t['passed']:4d}/{cpu:<4d} passed; {t['skipped']} skipped "
              f"(GPU-only)")
    pct = 100.0 * cpu_pass / cpu_all if cpu_all else 0.0
    print(f"{'total':18s} CPU tests {cpu_pass:4d}/{cpu_all:<4d} passed ({pct:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
