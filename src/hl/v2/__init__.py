"""hl.v2: PaddlePaddle's v2 API (2017) on hl, so a v2 trainer script runs with one changed
line, ``import hl.v2 as paddle``:

    paddle.init(use_gpu=False, trainer_count=1)
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(13))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    y_predict = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    cost = paddle.layer.square_error_cost(input=y_predict, label=y)
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Momentum(momentum=0))
    trainer.train(reader=paddle.batch(paddle.dataset.diabetes.train(), batch_size=2),
                  num_passes=30, feeding={"x": 0, "y": 1})

The layers build a graph (graph.py); parameters, training, testing and infer each run the
subgraph their targets need, as an hl Module (network.py), trained by hl.training's loop with
v2's optimisers (optimizer.py). See docs/v2.md.
"""
import warnings

from .. import errors
from . import activation, attr, data_type, dataset, event, layer, networks, optimizer
from . import parameters, pooling, reader, trainer
from .inference import Inference, infer
from .minibatch import batch

__all__ = ["init", "batch", "infer", "Inference", "activation", "attr", "data_type", "dataset",
           "event", "layer", "networks", "optimizer", "parameters", "pooling", "reader",
           "trainer"]

_warned = False


def init(use_gpu=False, trainer_count=1, **kwargs):
    """v2's start-up call. hl runs on its default device: use_gpu=True asks for a GPU and
    falls back to the CPU with a warning where hl has none; trainer_count is accepted and
    ignored (hl's kernels use the machine's threads); seed=N seeds hl's generator (parameter
    draws, dropout) and Python's random (paddle.reader.shuffle), so a run repeats. Other
    keywords v2 scripts pass (log levels, ...) are accepted and reported once in a warning."""
    global _warned
    from .. import cuda_available, set_default_device
    if use_gpu:
        if cuda_available():
            set_default_device("cuda")
        else:
            warnings.warn("paddle.init(use_gpu=True): no GPU is available to hl; running on "
                          "the CPU", stacklevel=2)
    if isinstance(trainer_count, bool) or not isinstance(trainer_count, int) or trainer_count < 1:
        raise errors.ValueError(f"paddle.init: trainer_count must be an integer >= 1, got "
                                f"{trainer_count!r}")
    seed = kwargs.pop("seed", None)
    if seed is not None:  # v2's --seed flag: hl's generator and the readers' shuffles
        import random
        from .. import manual_seed
        manual_seed(int(seed))
        random.seed(int(seed))
    if kwargs and not _warned:
        _warned = True
        warnings.warn(f"paddle.init: hl ignores the options {sorted(kwargs)}", stacklevel=2)
