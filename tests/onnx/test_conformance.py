"""ONNX's node conformance cases through hl.onnx.Backend: every case passes or is listed in
conformance_exclusions.txt with its reason.

A listed case is marked xfail(strict=True), so one that starts passing fails here (XPASS):
remove its line, or regenerate the list with ``python bench/onnx_conformance.py
--write-exclusions``. A listed case that now fails for a reason of another category (an
unsupported operator that became a wrong answer) fails too, so the reasons stay true.
"""
import warnings

import pytest

from . import conformance as conf

CASES = conf.all_cases()
EXCLUDED = conf.read_exclusions()


class ListedFailure(pytest.fail.Exception):
    """An excluded case failed as its exclusion line says. A pytest.fail exception reported
    as its message alone: formatting ~1,800 full tracebacks took most of a minute."""


def _params():
    params = []
    for name in sorted(CASES):
        marks = ()
        if name in EXCLUDED:
            category, reason = EXCLUDED[name]
            marks = pytest.mark.xfail(strict=True, raises=ListedFailure,
                                      reason=f"{category}: {reason}")
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _params())
def test_case(name):
    import hl
    import hl.onnx
    # The random operators' cases (Bernoulli: 10 unseeded draws) are listed as failing; a
    # fixed seed keeps a chance match from turning one into an XPASS now and then.
    hl.manual_seed(0)
    if name not in EXCLUDED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            conf.run_case(CASES[name], hl.onnx.Backend)
        return
    listed = EXCLUDED[name][0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            conf.run_case(CASES[name], hl.onnx.Backend)
    except Exception as e:  # noqa: BLE001 - compared with the listed category below
        error = conf.describe_error(e)
        category = conf.classify(error)[0]
        if category != listed:
            pytest.fail(f"listed as '{listed}' but fails as '{category}': {error}")
        raise ListedFailure(error, pytrace=False) from None


def test_exclusions_name_known_cases():
    """Every line of the exclusion file names a case onnx has, under a known category."""
    unknown = sorted(set(EXCLUDED) - set(CASES))
    assert not unknown, f"exclusions name cases onnx does not have: {unknown[:10]}"
    bad = sorted(n for n, (c, _) in EXCLUDED.items() if c not in conf.CATEGORIES)
    assert not bad, f"exclusions outside a known category header: {bad[:10]}"


def test_op_of_names_the_expanded_operator():
    assert conf.op_of(CASES["test_relu"]) == "Relu"
    assert conf.op_of(CASES["test_softmax_axis_0_expanded"]) == "Softmax"
    assert conf.op_of(CASES["test_layer_normalization_2d_axis0_expanded"]) == \
        "LayerNormalization"


def test_classify_reads_the_error_text():
    assert conf.classify("UnsupportedError: ONNX operator 'Abs' (domain 'ai.onnx', opset 13) "
                         "in node 'a' is not supported by hl; hl.onnx.supported_ops() lists")\
        == (conf.UNSUPPORTED, "UnsupportedError: Abs (opset 13) not supported")
    assert conf.classify("UnsupportedError: ONNX operator 'Adam' (domain "
                         "'ai.onnx.preview.training', opset 1) in node 'a' is not supported")[0] \
        == conf.TRAINING
    assert conf.classify("UnsupportedError: ONNX operator 'SequenceAt' (domain 'ai.onnx', "
                         "opset 11) in node 'a' is not supported")[0] == conf.SEQUENCE
    assert conf.classify("UnsupportedError: BackendRep.run: input 'x' has ONNX element type "
                         "UINT16, which hl cannot hold")[0] == conf.DTYPE
    # uint8 is an hl dtype: a handler refusing it rejects the case, not the dtype
    assert conf.classify("DTypeError: ONNX node 'm' (MaxPool, opset 12): max_pool: expected a "
                         "float32 input, got uint8")[0] == conf.REJECTED
    assert conf.classify("AssertionError: Not equal to tolerance rtol=1e-07, atol=0; "
                         "output 0; Mismatched elements: 1 / 6")[0] == conf.VALUES
    assert conf.classify("AssertionError: output 0: dtype float32, expected int64")[0] \
        == conf.LAYOUT
    assert conf.classify("AssertionError: output 0: a ndarray, expected a sequence of 2")[0] \
        == conf.SEQUENCE
    assert conf.classify("DTypeError: ONNX node 'M' (MatMul, opset 23): matmul: bfloat16 "
                         "computes on cpu are not available; cast ...")[0] == conf.HALF
    assert conf.classify("TypeError (not an hl error): 'NoneType' object")[0] == conf.CRASH


def test_regeneration_keeps_hand_written_reasons(tmp_path):
    old = {"test_a": (conf.VALUES, "known numerical difference: float32 accumulation"),
           "test_b": (conf.UNSUPPORTED, "UnsupportedError: Foo (opset 1) not supported"),
           "test_c": (conf.VALUES, "known numerical difference: gone")}
    failures = {"test_a": "AssertionError: output 0; Mismatched elements: 1 / 4",
                "test_b": "UnsupportedError: ONNX operator 'Bar' (domain 'ai.onnx', opset 1) "
                          "in node 'x' is not supported by hl",
                "test_c": "ShapeError: ONNX node 'n' (Conv, opset 11): bad"}
    entries, dropped = conf.merge_exclusions(failures, old)
    assert entries["test_a"] == old["test_a"]
    assert entries["test_b"] == (conf.UNSUPPORTED, "UnsupportedError: Bar (opset 1) not supported")
    assert entries["test_c"] == (conf.REJECTED, "ShapeError: Conv (opset 11): bad")
    assert dropped == ["test_c"]
    path = tmp_path / "ex.txt"
    conf.write_exclusions(entries, path)
    assert conf.read_exclusions(path) == entries
