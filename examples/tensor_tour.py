"""A short tour of hl tensors: creation, numpy interop, views, broadcasting, matmul.

    python examples/tensor_tour.py
"""
import numpy as np

import hl

hl.manual_seed(0)
x = hl.randn(3, 4)                      # float32, from the core's counter-based generator
print("x =", x)

# numpy shares memory with a CPU tensor: no copy either way
a = x.numpy()
a[0, 0] = 42.0
print("after writing through numpy, x[0, 0] =", x[0, 0].item())

# views: transpose, slicing with steps, expand (broadcast) move no data
xt = x.T
print("x.T shape", xt.shape, "contiguous:", xt.is_contiguous(), "shares memory:", xt.shares_memory(x))
print("every second column:", x[:, ::2].shape)

# broadcasting arithmetic, numpy rules
y = x * hl.arange(4, dtype="float32") + 1.0
print("x * arange(4) + 1 =", y)

# matmul through OpenBLAS, reductions
g = x @ x.T
print("Gram matrix diagonal equals row sums of squares:",
      np.allclose(np.diag(g.numpy()), (x * x).sum(axis=1).numpy(), rtol=1e-5))

# errors name the op and the shapes
try:
    x + hl.ones(3, 3)
except hl.errors.ShapeError as e:
    print("ShapeError:", e)
