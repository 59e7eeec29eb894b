"""paddle.infer: the output layers' subgraph run on samples, with no cost and no label.

``infer(output_layer, parameters, input, feeding=None, field='value')``: input is a list of
samples (tuples of fields; fields beyond the data layers the outputs need are ignored, so
(image, label) samples work too). 'value' gives a 2-D float array [rows, size] per output
(a sequence gives one row per step), 'id' a 1-D int array (for max_id outputs). Several
layers or fields give a list, layer by layer, field by field."""
import numpy as np

from .. import errors
from ..autograd import no_grad
from ..layers.layer import Layer
from ..training.distributed import gather_predictions, slice_bounds
from ..training.step import mode
from . import parallel
from .feeder import Feeder
from .graph import check_layers
from .network import Network, host_rows
from .operators.dense import MaxId

__all__ = ["infer", "Inference"]

_CHUNK = 1024  # samples per forward pass: bounded memory for long inputs


class Inference:
    def __init__(self, output_layer, parameters):
        self.layers = check_layers(output_layer, "paddle.infer")
        self.network = Network(self.layers, parameters)

    def iter_infer(self, input, feeding=None):
        """Per chunk of samples, the output layers' values."""
        _check_input(input)
        feeder = Feeder(self.network.data_layers, feeding, "paddle.infer")
        with mode(self.network, False), no_grad():
            for start in range(0, len(input), _CHUNK):
                chunk = input[start:start + _CHUNK]
                arrays = feeder.arrays(chunk, start // _CHUNK)
                yield Layer.__call__(self.network, feeder.values(arrays))

    def infer(self, input, feeding=None, field="value", distribute=None):
        """``distribute=True`` (or a set distribution), called on every rank with the same
        input: each rank runs its contiguous slice of the samples and the outputs are
        gathered in order, so every rank gets the whole result."""
        fields = [field] if isinstance(field, str) else list(field)
        for f in fields:
            if f not in ("value", "id"):
                raise errors.ValueError(f"paddle.infer: field must be 'value' or 'id' (or a "
                                        f"list of them), got {f!r}")
        _check_input(input)
        world = parallel.resolve(distribute, "paddle.infer")
        samples = input
        if world is not None and isinstance(input, (list, tuple)):
            lo, hi = slice_bounds(len(input), world)
            samples = input[lo:hi]
        out = None
        if world is None or len(samples):
            parts = [[] for _ in range(len(self.layers) * len(fields))]
            for values in self.iter_infer(samples, feeding):
                k = 0
                for layer, v in zip(self.layers, values):
                    for f in fields:
                        parts[k].append(_field(layer, v, f))
                        k += 1
            out = [np.concatenate(p, axis=0) for p in parts]
        if world is not None:  # every rank's rows, in rank order (= sample order)
            out = gather_predictions(out, world)
        return out[0] if len(out) == 1 else out


def _check_input(input):
    if not isinstance(input, (list, tuple)) or not input:
        raise errors.ValueError(f"paddle.infer: input must be a non-empty list of samples, "
                                f"got {type(input).__name__ if not isinstance(input, (list, tuple)) else 'an empty list'}")


def _field(layer, v, field):
    is_id = isinstance(layer.op, MaxId)
    if field == "id":
        if not is_id:
            raise errors.ValueError(f"paddle.infer: field='id' needs a max_id layer; "
                                    f"{layer.name!r} is a {layer.op.kind} layer (use "
                                    f"field='value', or paddle.layer.max_id(input={layer.name}))")
        return host_rows(v).reshape(-1).astype(np.int64)
    rows = host_rows(v)
    return rows.reshape(-1, 1).astype(np.float32) if is_id else rows


def infer(output_layer, parameters, input, feeding=None, field="value", distribute=None):
    return Inference(output_layer, parameters).infer(input, feeding, field, distribute)
