"""What every benchmark script does first."""
import os
import sys


def setup(threads):
    """Pins OpenMP / OpenBLAS / MKL to `threads` (before any library starts its pool) and
    lets the scripts import hl from the checkout."""
    if threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(threads)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
