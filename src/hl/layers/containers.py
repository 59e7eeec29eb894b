"""Sequential: layers (or callables) applied one after another."""
from .layer import Layer


class Sequential(Layer):
    """``Sequential(layer1, layer2, ...)``; its parameters are named by position
    (``0.W``, ``2.b``), or by a layer's own name where it was given one."""

    def __init__(self, *layers, name=None):
        super().__init__(name)
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        self._layers = []
        for layer in layers:
            self.add(layer)

    def add(self, layer):
        self._layers.append(layer)
        if isinstance(layer, Layer) and layer._parent is not self:
            # a layer listed twice (weight sharing) keeps the name of its first place
            key = layer.name or str(len(self._layers) - 1)
            layer.__dict__["_parent"] = self
            layer.__dict__["_local_name"] = key
        return self

    def children(self):
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
