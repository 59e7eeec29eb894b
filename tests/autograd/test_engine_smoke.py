import numpy as np
import hl
from tests.autograd.harness import check_grad, check_torch, randn


def test_smoke():
    check_grad(lambda a, b: (a * b + a.exp()).tanh(), [randn(3, 4), randn(3, 4)])
    check_grad(lambda a, b: a / b + a, [randn(3, 4), randn(1, 4) + 3])
    check_grad(lambda a: a.sum(axis=1), [randn(3, 4)])
    check_grad(lambda a: a.mean(axis=(0, 2), keepdims=True), [randn(3, 4, 2)])
    import torch
    check_torch(lambda a, b: (a * b).relu() - b, lambda a, b: (a * b).relu() - b,
                [randn(3, 4), randn(4)])
