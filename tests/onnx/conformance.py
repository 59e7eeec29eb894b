"""ONNX's own single-operator conformance cases, collected in code (the onnx wheel ships the
generators, not the data files), one function that runs a case through a backend, and the
exclusion list: the cases hl is expected to fail, each with its reason.

Used by tests/onnx/test_conformance.py (every case passes or is listed in
tests/onnx/conformance_exclusions.txt) and bench/onnx_conformance.py (the per-operator table,
and ``--write-exclusions``, which rewrites the list from the current failures).
"""
import functools
import os
import re
import warnings

import numpy as np

EXCLUSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "conformance_exclusions.txt")


@functools.lru_cache(maxsize=None)
def all_cases():
    """{case name: onnx.backend.test TestCase} for every node case onnx knows."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return {c.name: c for c in cases}


# onnx names the intermediate values of an expanded case "<Op>_<case>_expanded_function_...".
_EXPANDED = re.compile(r"([A-Za-z0-9]+)_test_\w*_expanded_function_")


def op_of(case):
    """The operator a case exercises: its node's type, or for an "expanded" case (the
    operator written as its function body of simpler ops) the operator that was expanded."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    for node in nodes:
        for out in node.output:
            m = _EXPANDED.match(out)
            if m:
                return m.group(1)
    # Not a function expansion: the longest node type the case's name starts with.
    types = [n.op_type for n in nodes]
    stem = case.name[len("test_"):].lower().replace("_", "")
    for t in sorted(set(types), key=len, reverse=True):
        if stem.startswith(t.lower()):
            return t
    return types[-1]


def run_case(case, backend):
    """Runs ``case`` through ``backend`` as onnx's own backend test runner does (prepare once,
    run each data set) and raises AssertionError on the first output that differs from
    ONNX's expected values: in count, shape, dtype or value (with the case's own rtol and
    atol; bfloat16 values within two bfloat16 steps, as onnx's runner allows)."""
    rep = backend.prepare(case.model, "CPU")
    for inputs, expected in case.data_sets:
        # onnx stores values numpy cannot type (float8, int4, some casts) as TensorProto
        outputs = rep.run([_array(x) for x in inputs])
        assert len(outputs) == len(expected), \
            f"{len(outputs)} outputs, expected {len(expected)}"
        for i, (got, want) in enumerate(zip(outputs, expected)):
            _compare(got, _array(want), case.rtol, case.atol, f"output {i}")


def _array(x):
    if isinstance(x, (list, tuple)):            # a sequence value
        return [_array(v) for v in x]
    if x is not None and not isinstance(x, np.ndarray) and hasattr(x, "raw_data"):
        from onnx import numpy_helper
        return numpy_helper.to_array(x)
    return x


def _compare(got, want, rtol, atol, what):
    if isinstance(want, list):
        assert isinstance(got, (list, tuple)), \
            f"{what}: a {type(got).__name__}, expected a sequence of {len(want)}"
        assert len(got) == len(want), f"{what}: {len(got)} items, expected {len(want)}"
        for j, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, rtol, atol, f"{what}[{j}]")
        return
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype == object:                    # strings
        assert got.tolist() == want.tolist(), f"{what} differs"
        return
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.name == "bfloat16":           # numpy's isclose cannot promote bfloat16
        rtol = max(rtol, 2 ** -6)
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def describe_error(e):
    """One line saying how a case failed: "ShapeError: ..." for an hl error, "AssertionError:
    ..." for a wrong result (numpy's multi-line report folded into one line), and
    "TypeError (not an hl error): ..." for anything else (a bug: hl should never crash)."""
    from hl.errors import HLError
    name = type(e).__name__
    text = str(e)
    if isinstance(e, AssertionError):
        # numpy's report: a blank line, "Not equal to tolerance ...", our err_msg, the
        # mismatch counts, then the arrays (dropped: long and not a reason).
        lines = [ln.strip() for ln in text.split(" ACTUAL:")[0].splitlines() if ln.strip()]
        return f"{name}: " + "; ".join(lines)
    first = text.strip().splitlines()[0] if text.strip() else ""
    if not isinstance(e, HLError):
        name += " (not an hl error)"
    return f"{name}: {first}"


def run_named(names, backend=None):
    """{name: None if it passed, else describe_error's line} for the named cases (a helper for
    working on one operator: run_named([n for n in all_cases() if 'conv' in n]))."""
    if backend is None:
        import hl.onnx
        backend = hl.onnx.Backend
    cases = all_cases()
    result = {}
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_case(cases[name], backend)
            result[name] = None
        except Exception as e:  # noqa: BLE001 - a report of what went wrong, per case
            result[name] = describe_error(e)
    return result


def report(ops=None, backend=None, show_failures=True):
    """Prints pass counts for the cases of the given operator types (all when None)."""
    cases = all_cases()
    names = [n for n, c in cases.items() if ops is None or op_of(c) in ops]
    res = run_named(names, backend)
    passed = sum(v is None for v in res.values())
    if show_failures:
        for n, v in sorted(res.items()):
            if v is not None:
                print(f"FAIL {n}: {v[:200]}")
    print(f"{passed}/{len(res)} passed")
    return res


# ---- why a case fails: categories derived from the error text -----------------------------

DTYPE = "dtype hl cannot hold"
UNSUPPORTED = "operator not supported"
TRAINING = "training-domain operator (ai.onnx.preview.training)"
SEQUENCE = "sequence, optional and string values"
VALUES = "output values differ (numerical difference)"
LAYOUT = "wrong output dtype, shape or count"
HALF = "float16/bfloat16 compute hl lacks on the CPU"
FEATURE = "operator feature not supported (an attribute value, rank, output or mode)"
REJECTED = "hl rejects the case (an hl error)"
CRASH = "crash (not an hl error)"
CATEGORIES = (DTYPE, UNSUPPORTED, TRAINING, SEQUENCE, HALF, FEATURE, VALUES, LAYOUT, REJECTED,
              CRASH)

# Element types hl has no dtype for, as onnx (INT8, FLOAT8E4M3FN) or numpy (int8) spells them.
_UNHELD = re.compile(r"\b(u?int[24]|int8|int16|uint16|uint32|uint64|string|float8\w*|"
                     r"float4\w*|complex(64|128)?)\b", re.IGNORECASE)
_OPERATOR = re.compile(r"ONNX operator '(\w+)' \(domain '([^']*)', opset (\d+)\)")
_SEQUENCE_OPS = re.compile(r"^(Sequence\w*|SplitToSequence|ConcatFromSequence|Optional\w*|"
                           r"String\w*|RegexFullMatch)$")
_HL_ERRORS = ("ShapeError", "DTypeError", "IndexError", "ValueError", "UnsupportedError",
              "ONNXError", "DeviceError", "MemoryError", "InternalError")


def classify(error):
    """(category, reason) for a failure, from describe_error's line. The reason is the error
    itself, shortened: node names and the closing advice dropped."""
    reason = _shorten(error)
    kind, _, message = error.partition(": ")
    m = _OPERATOR.search(message)
    if kind == "UnsupportedError" and m:
        op, domain, opset = m.groups()
        where = f"opset {opset}" if domain in ("", "ai.onnx") else f"{domain} opset {opset}"
        reason = f"UnsupportedError: {op} ({where}) not supported"
        if domain == "ai.onnx.preview.training":
            return TRAINING, reason
        return (SEQUENCE if _SEQUENCE_OPS.match(op) else UNSUPPORTED), reason
    if "cannot hold" in message or (kind in ("DTypeError", "UnsupportedError")
                                    and _UNHELD.search(message)):
        return DTYPE, reason
    if kind in _HL_ERRORS and re.search(r"\b(sequence|optional)\b", message, re.IGNORECASE):
        return SEQUENCE, reason
    if kind == "DTypeError" and "computes on cpu are not available" in message:
        return HALF, reason
    if kind == "AssertionError":
        if "expected a sequence" in message:    # a tensor where ONNX has a sequence value
            return SEQUENCE, reason
        if re.match(r"output \d+: (dtype|shape) |\d+ outputs, expected", message):
            return LAYOUT, reason
        return VALUES, reason
    if kind == "UnsupportedError":
        return FEATURE, reason
    if kind in _HL_ERRORS:
        return REJECTED, reason
    return CRASH, reason


def _shorten(error, limit=200):
    text = re.sub(r"ONNX node '[^']*' \((\w+), (opset \d+)\)", r"\1 (\2)", error)
    text = re.sub(r" in node '[^']*'", "", text)
    text = text.split("; hl.onnx.supported_ops()")[0]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_generated(reason):
    """Was this reason written by classify (an error's own text), not by hand? Generated
    reasons start with the error's type; regeneration rewrites them, and keeps a hand-written
    one while its case still fails in the same category."""
    return re.match(r"^\w+(Error|Exception)\b", reason) is not None


# ---- the exclusion file ------------------------------------------------------------------

_HEADER = """\
# ONNX node conformance cases hl is expected to fail. tests/onnx/test_conformance.py marks
# each xfail(strict=True): a listed case that starts passing fails the suite (remove its line),
# and so does one that now fails for a reason of another category.
#
# Regenerate from the current failures:  python bench/onnx_conformance.py --write-exclusions
#
# One line per case, `test_name  # reason`, under a `# == category ==` header. A reason that
# starts with an error type (UnsupportedError: ...) is the case's actual error and is rewritten
# on regeneration; a reason written by hand (anything else) is kept while the case still
# fails in the same category.
"""


def read_exclusions(path=EXCLUSIONS):
    """{case name: (category, reason)} from the exclusion file ({} when there is none)."""
    if not os.path.exists(path):
        return {}
    result = {}
    category = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            header = re.match(r"^# == (.*) ==$", line)
            if header:
                category = header.group(1)
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            result[name.strip()] = (category, reason.strip())
    return result


def merge_exclusions(failures, old):
    """The new exclusion entries {name: (category, reason)} from {name: error line} of the
    failing cases, keeping ``old``'s hand-written reasons where the category still holds.
    Also returns the names whose hand-written reason was dropped (the category changed)."""
    entries, dropped = {}, []
    for name, error in failures.items():
        category, reason = classify(error)
        if name in old:
            old_category, old_reason = old[name]
            if old_reason and not is_generated(old_reason):
                if old_category == category:
                    reason = old_reason
                else:
                    dropped.append(name)
        entries[name] = (category, reason)
    return entries, dropped


def write_exclusions(entries, path=EXCLUSIONS):
    """Writes {name: (category, reason)} grouped by category, in CATEGORIES order."""
    order = {c: i for i, c in enumerate(CATEGORIES)}
    groups = {}
    for name, (category, reason) in entries.items():
        groups.setdefault(category, []).append((name, reason))
    with open(path, "w", encoding="utf-8") as f:
        f.write(_HEADER)
        for category in sorted(groups, key=lambda c: (order.get(c, len(order)), c)):
            rows = sorted(groups[category])
            f.write(f"\n# == {category} ==\n# {len(rows)} cases\n")
            for name, reason in rows:
                f.write(f"{name}  # {reason}\n")
