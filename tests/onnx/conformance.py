"""ONNX's own single-operator conformance cases, collected in code (the onnx wheel ships the
generators, not the data files), and one function that runs a case through a backend.

Used by tests/onnx/test_conformance.py (every case passes or is listed in
tests/onnx/conformance_exclusions.txt) and bench/onnx_conformance.py (the per-operator table).
"""
import functools
import warnings

import numpy as np


@functools.lru_cache(maxsize=None)
def all_cases():
    """{case name: onnx.backend.test TestCase} for every node case onnx knows."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return {c.name: c for c in cases}


def op_of(case):
    """The operator a case exercises: its node's type, or for a multi-node ("expanded")
    case, the type named by the case."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    types = [n.op_type for n in nodes]
    stem = case.name[len("test_"):].lower().replace("_", "")
    for t in sorted(set(types), key=len, reverse=True):
        if stem.startswith(t.lower()):
            return t
    return types[-1]


def run_case(case, backend):
    """Runs every data set of ``case`` through ``backend`` (prepare, then run) and raises
    AssertionError on the first output that differs from ONNX's expected values (in dtype,
    shape or value, with the case's own rtol and atol)."""
    for inputs, expected in case.data_sets:
        rep = backend.prepare(case.model, "CPU")
        outputs = rep.run(list(inputs))
        assert len(outputs) == len(expected), \
            f"{len(outputs)} outputs, expected {len(expected)}"
        for i, (got, want) in enumerate(zip(outputs, expected)):
            got = np.asarray(got)
            want = np.asarray(want)
            if want.dtype == object:
                assert list(got.reshape(-1)) == list(want.reshape(-1)), f"output {i} differs"
                continue
            assert got.dtype == want.dtype, f"output {i}: dtype {got.dtype}, expected {want.dtype}"
            assert got.shape == want.shape, f"output {i}: shape {got.shape}, expected {want.shape}"
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol,
                                       err_msg=f"output {i}")


def run_named(names, backend=None):
    """{name: None if it passed, else the error text} for the named cases (a helper for
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
            result[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
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
