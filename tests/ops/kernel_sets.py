"""Results of a test module's cases under each CPU kernel set (libcore/src/cpu/cpu_features.h).

The AVX-512 kernels keep the AVX2 kernels' summation order and epilogue formulas, so the tests
compare the two paths bit for bit. HL_CPU_AVX512=0 turns the AVX-512 kernels off; it is read
once per process, so each side runs in a process of its own. On a CPU without AVX-512 both
sides run AVX2 and the comparison still holds (and the float64 checks still run).
"""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def results(path, module, function, avx512):
    """The npz that ``module.function(path)`` writes, run in a fresh process with the
    AVX-512 kernels allowed (where the CPU has them) or, with avx512=False, turned off."""
    env = dict(os.environ)
    if avx512:
        env.pop("HL_CPU_AVX512", None)
    else:
        env["HL_CPU_AVX512"] = "0"
    code = (f"import sys; sys.path.insert(0, {ROOT!r}); "
            f"from {module} import {function}; {function}({str(path)!r})")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return np.load(path)


def cpu_has_avx512():
    """Whether the CPU has the AVX-512 sets hl_cpu_avx512() asks for (read from /proc)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return all(f in flags for f in ("avx512f", "avx512vl", "avx512dq", "avx512bw"))


def check_sides(fast, avx2):
    """Each side ran the kernels it was meant to: the default side AVX-512 where the CPU has
    it, the other never (each npz holds `kernels`, hl._core.cpu_kernels() where it ran)."""
    assert str(avx2["kernels"]) in ("avx2", "portable")
    if cpu_has_avx512():
        assert str(fast["kernels"]) == "avx512"
    else:
        assert str(fast["kernels"]) == str(avx2["kernels"])


def both_sides(folder, module):
    """(default side, AVX2 side): ``module.write_results`` run in a process of each kind, npz
    files in folder, each side checked to have run the kernels it was meant to."""
    fast = results(folder / "default.npz", module, "write_results", avx512=True)
    avx2 = results(folder / "avx2.npz", module, "write_results", avx512=False)
    check_sides(fast, avx2)
    return fast, avx2


def save_cases(path, cases, key, run):
    """Every case of ``cases()`` at one and two threads, ``run(case)`` under the name
    ``t{threads}_{key(case)}``, into the npz at path with the kernel set that ran them."""
    import hl
    import hl._core
    out = {"kernels": np.array(hl._core.cpu_kernels())}
    before = hl.get_num_threads()
    try:
        for threads in (1, 2):
            hl.set_num_threads(threads)
            for case in cases():
                out[f"t{threads}_{key(case)}"] = run(case)
    finally:
        hl.set_num_threads(before)
    np.savez(path, **out)


def same_bits(x, y):
    """The same bits, except that a NaN only has to be a NaN: which NaN operand an add or FMA
    passes on (hence the result's sign and payload) depends on the operand order of the
    instruction the compiler picked, which C does not fix (x + y and y + x are the same
    expression), so NaN bits are not a property of the kernels' order of sums."""
    nan = np.isnan(x)
    return bool(np.array_equal(nan, np.isnan(y)) and
                np.array_equal(x.view(np.uint32)[~nan], y.view(np.uint32)[~nan]))


def one_result(fast, avx2, key):
    """Case `key`'s result at one thread on the default side, after checking that two threads
    there and one and two threads on the AVX2 side give the same bits (same_bits)."""
    one = fast[f"t1_{key}"]
    for got in (fast[f"t2_{key}"], avx2[f"t1_{key}"], avx2[f"t2_{key}"]):
        assert got.shape == one.shape, key
        assert same_bits(got, one), key
    return one
