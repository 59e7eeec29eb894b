"""Sequential: layers (or callables) applied one after another; a Module, so it is both
PyTorch's nn.Sequential (a sub-layer inside another model, parameters named by position:
``0.W``, ``2.b``) and Keras's Sequential (compile / fit / summary / save_states).

hl.Sequential, hl.layers.Sequential and hl.model.Sequential are this one class.
"""
from .. import errors
from ..layers.layer import Layer
from ..layers.symbolic import SymbolicTensor, run_on_placeholders, shapes_of
from .module import Module


class Sequential(Module):
    """``Sequential(layer1, layer2, ...)`` or ``Sequential([layer1, ...])``. Parameters are
    named by position, or by a layer's own name where it was given one. Keras's form
    ``Sequential([hl.Input(shape=(784,)), Dense(64), ...])`` builds every layer at once from
    the input's shape (the batch axis left unknown), so summary() works before any data."""

    def __init__(self, *layers, name=None):
        super().__init__(name)
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        self._layers = []
        self._input = None
        for layer in layers:
            self.add(layer)

    def add(self, layer):
        """Appends a layer (or any callable); an hl.Input first fixes the input shape."""
        if isinstance(layer, SymbolicTensor):
            if self._layers or self._input is not None:
                raise errors.ValueError("Sequential.add: an hl.Input can only come first")
            self.__dict__["_input"] = layer
            return self
        if not (isinstance(layer, Layer) or callable(layer)):
            raise errors.ValueError(f"Sequential.add: expected a layer or a callable, received "
                                    f"{type(layer).__name__}")
        self._layers.append(layer)
        if isinstance(layer, Layer) and layer._parent is not self:
            # a layer listed twice (weight sharing) keeps the name of its first place
            layer.__dict__["_parent"] = self
            layer.__dict__["_local_name"] = layer.name or str(len(self._layers) - 1)
        if self._input is not None and isinstance(layer, Layer):
            self._build_from_input()
        elif isinstance(layer, Layer) and layer._built and self._parent is None:
            self.get_states()  # a layer built before it joined: its tensors take their paths
        return self

    def pop(self):
        """Removes and returns the last layer (Keras's Sequential.pop)."""
        if not self._layers:
            raise errors.ValueError("Sequential.pop: there are no layers to remove")
        layer = self._layers.pop()
        if isinstance(layer, Layer) and layer._parent is self and \
                not any(layer is other for other in self._layers):
            layer.__dict__["_parent"] = None
        return layer

    def _build_from_input(self):
        # each layer built from the input's shape; output shapes kept for summary
        out = run_on_placeholders(lambda x: Layer.__call__(self, x), self._input.placeholder())
        self.__dict__["_output_shapes"] = shapes_of(out)

    def input_placeholders(self):
        """[a Placeholder of the hl.Input's shape (unknown axes of size 1)], or None without
        one: compile and to_onnx take it as the example input."""
        return None if self._input is None else [self._input.placeholder(unknown=1)]

    def named_children(self):
        seen = set()
        for i, layer in enumerate(self._layers):
            if isinstance(layer, Layer) and id(layer) not in seen:
                seen.add(id(layer))
                yield layer.name or str(i), layer

    def forward(self, x):
        for layer in self._layers:
            x = layer(x)
        return x

    def __getitem__(self, i):
        return self._layers[i]

    def __len__(self):
        return len(self._layers)

    def __iter__(self):
        return iter(self._layers)


__all__ = ["Sequential"]
