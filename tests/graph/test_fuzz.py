"""A fuzz test: random sequences of calls that change batch sizes, input dtypes and modes
(train_one_batch, predict, evaluate; train / eval) never replay a plan on the wrong signature:
every call in graph mode gives exactly what an eager twin gives."""
import warnings

import numpy as np
import pytest

import hl

from .models import MLP


@pytest.mark.parametrize("seed", range(4))
def test_random_calls_match_eager(seed):
    rng = np.random.default_rng(seed)
    models = []
    for graph in (False, True):
        hl.manual_seed(seed)
        m = MLP(hl.opt.Adam(lr=0.01), batchnorm=True)
        m.compile([hl.Placeholder((4, 12))], is_train=True, use_graph=graph)
        m.compile(optimizer=m.optim, loss=m.loss_fn)
        models.append(m)
    eager, graph = models
    graph._graph_runner().cache_size = 5  # small: the bound is met too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bound's warning
        for i in range(80):
            n = int(rng.choice([3, 4, 4, 5]))
            dtype = np.float32 if rng.random() < 0.7 else np.float64  # fit casts float64
            ydtype = np.int64 if rng.random() < 0.7 else np.int32
            x = rng.standard_normal((n, 12)).astype(dtype)
            y = rng.integers(0, 4, n).astype(ydtype)
            what = rng.choice(["step", "step", "predict", "evaluate", "eval_step"])
            out = []
            for m in models:
                if what == "eval_step":  # train_one_batch with batch norm in eval mode
                    m.bn.eval()
                if what in ("step", "eval_step"):
                    o, loss = m.train_one_batch(hl.tensor(x.astype(np.float32)), hl.tensor(y))
                    out.append((o.numpy().copy(), float(loss)))
                elif what == "predict":
                    out.append((m.predict(x, batch_size=n, verbose=0), None))
                else:
                    out.append((None, m.evaluate(x, y, batch_size=n, verbose=0)))
                m.bn.train()
            (oe, le), (og, lg) = out
            assert le == lg, f"call {i} ({what}, n={n}, {dtype.__name__}, {ydtype.__name__})"
            if oe is not None:
                np.testing.assert_array_equal(og, oe, err_msg=f"call {i} ({what})")
    replayed = sum(s["replayed"] for s in graph._graph_runner().stats().values())
    assert replayed > 10, graph._graph_runner().stats()
