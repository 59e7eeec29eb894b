"""hl.Module: a model (SINGA's Model API): a Layer with compile, train_one_batch, Keras's
fit / evaluate / predict (from hl.training.Trainer), and save_states / load_states
(hl/checkpoint).

    class CNN(hl.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = hl.layers.Conv2d(20, 5)
            ...
            self.loss_fn = hl.losses.SoftmaxCrossEntropy()
            self.optim = hl.opt.SGD(lr=0.05, momentum=0.9)

        def forward(self, x):
            return ...

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss_fn(out, y)
            self.optim.backward_and_update(loss)
            return out, loss

    model = CNN()
    model.compile([hl.Placeholder((64, 1, 28, 28))], is_train=True)   # every parameter exists

Keras's way, without writing train_one_batch:

    model.compile(optimizer="adam", loss="cross_entropy", metrics=["accuracy"])
    history = model.fit(x, y, epochs=5, validation_split=0.2)
"""
import inspect

from .. import errors
from ..autograd import Placeholder, no_grad
from ..autograd.placeholder import standing_in_for
from ..layers.layer import Layer, _layers_in
from ..opt.optimizer import Optimizer
from ..training.trainer import Trainer
from .graph_mode import GraphRunner, graph_step, runner_of


class Module(Trainer, Layer):
    """Subclass it, build layers in __init__, write forward (and optionally
    train_one_batch). fit / evaluate / predict come from hl.training.Trainer."""

    _is_graph_network = False  # True for functional models (Keras's flag), read by summary

    def __init__(self, name=None):
        super().__init__(name)
        _module_init(self)

    def __call__(self, *xs, **kwargs):
        """``model(x)`` runs forward, as for any layer, with one exception kept for SINGA's
        scripts: a top-level module put in training mode explicitly (``model.train()``, or
        ``compile([x], is_train=True)``) runs ``train_one_batch`` when the arguments fit
        train_one_batch's signature, so ``out, loss = model(tx, ty)`` is one training step.
        ``model(x)`` with a single input still runs forward (train_one_batch needs x and y),
        as does every call after ``model.eval()``, every call on a module inside another, and
        every call on a module left in its default mode: a Keras user's ``model(x)`` is
        always the forward pass. fit, evaluate and predict never go through this rule."""
        if self._runs_step(xs, kwargs):
            return self.train_one_batch(*xs, **kwargs)
        return Layer.__call__(self, *xs, **kwargs)

    def _runs_step(self, xs, kwargs):
        if self.__dict__["_training"] is not True or self._parent is not None:
            return False
        try:
            inspect.signature(self.train_one_batch).bind(*xs, **kwargs)
        except TypeError:
            return False
        return True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "train_one_batch" in cls.__dict__:  # a SINGA-style step runs on plans in graph mode
            cls.train_one_batch = graph_step(cls.__dict__["train_one_batch"])

    def __getstate__(self):
        """Plans hold core handles and are rebuilt on use: they are never pickled."""
        state = self.__dict__.copy()
        state.pop("_graph", None)
        return state

    def compile(self, inputs=None, is_train=True, use_graph=False, graph_alg="sequence",
                sequential=None, *, optimizer=None, loss=None, metrics=None,
                jit_compile=None):
        """Two compiles in one call, either or both:

        SINGA's: ``compile([x], is_train=True, use_graph=False, graph_alg='sequence')``
        creates every parameter by running forward once on `inputs`: hl.Placeholder objects
        (shapes only: nothing is computed or allocated but the parameters) or real tensors,
        and puts the module in training mode when is_train (see __call__).
        ``sequential`` is SINGA's released spelling of ``graph_alg``. ``use_graph=True``
        switches graph mode on (see graph()).

        Keras's: ``compile(optimizer='adam', loss='cross_entropy', metrics=['accuracy'])``
        (names or objects; see hl/training/config.py) prepares fit. Positionally,
        ``compile('adam', 'mse')`` reads as Keras's optimizer and loss. Keras's
        ``jit_compile=True`` is graph mode (the same switch as use_graph); Keras's default
        'auto' and False leave the mode as it is."""
        if isinstance(inputs, (str, Optimizer)):  # Keras's compile(optimizer, loss)
            if optimizer is not None:
                raise errors.ValueError("compile: the optimizer is given twice")
            optimizer, inputs = inputs, None
            if not isinstance(is_train, bool):
                loss, is_train = is_train, True
        if sequential is not None:
            graph_alg = "sequence" if sequential else "topological"
        if graph_alg not in ("sequence", "topological"):
            raise errors.ValueError(f"compile: graph_alg must be 'sequence' or 'topological', "
                                    f"got {graph_alg!r}")
        if jit_compile not in (None, "auto", True, False):
            raise errors.ValueError(f"compile: jit_compile must be True, False or 'auto', got "
                                    f"{jit_compile!r}")
        self._compile_training(optimizer, loss, metrics)
        # Module.graph by name: a subclass may hold something else under "graph" (ONNXModel's
        # ONNX graph)
        if use_graph or jit_compile is True:
            Module.graph(self, True, graph_alg == "sequence")
        elif inputs is not None or jit_compile is False:
            Module.graph(self, False)
        if inputs is None:
            return self
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        for i, x in enumerate(inputs):
            if not hasattr(x, "shape") or not hasattr(x, "dtype"):
                raise errors.ValueError(f"compile: input {i} is a {type(x).__name__}; pass "
                                        f"hl.Placeholder(shape, dtype) or tensors")
        self.train(is_train)
        target = next((x.device for x in inputs if isinstance(x, Placeholder)), None)
        with no_grad(), standing_in_for(target):
            Layer.__call__(self, *inputs)
        d = self.__dict__
        d["_compiled"] = True
        d["_input_shapes"] = [tuple(x.shape) for x in inputs]
        return self

    def graph(self, mode=True, sequential=True):
        """SINGA's switch for graph mode. On, train_one_batch, fit, evaluate, predict and
        train_on_batch run as recorded plans: per input signature the first step runs
        eagerly, the second is recorded, later ones replay the plan in one core call.
        ``sequential=False`` is SINGA's 'topological' order: the plan's calls run in
        dependency order (the results are identical). See docs/training.md, graph mode."""
        d = self.__dict__
        d["graph_mode"] = bool(mode)
        d["sequential"] = bool(sequential)
        d.pop("_graph", None)  # a new switch starts with no plans
        if mode:
            d["_graph"] = GraphRunner(self, bool(sequential))
        return self

    train_one_batch = graph_step(Trainer.train_one_batch)

    def _graph_runner(self):
        """fit / evaluate / predict ask here whether to run their steps on plans."""
        return runner_of(self)

    # ---- Keras's model API ------------------------------------------------------------

    @property
    def layers(self):
        """The direct sub-layers, in order (Keras's ``model.layers``)."""
        if "layers" in self.__dict__:
            return self.__dict__["layers"]
        return [child for _, child in self.named_children()]

    @layers.setter
    def layers(self, value):
        # PyTorch code often names a list of blocks ``self.layers``: keep it as an attribute
        # (its layers become children, named layers.0, layers.1, ...), shadowing the property.
        for child_name, child in _layers_in("layers", value):
            child.__dict__["_parent"] = self
            child.__dict__["_local_name"] = child_name
        self.__dict__["layers"] = value

    def get_layer(self, name=None, index=None):
        """A sub-layer by name (its ``name``, or its path such as ``"blk1.conv1"``) or by
        ``index`` into ``model.layers``, as Keras's get_layer."""
        if (name is None) == (index is None):
            raise errors.ValueError("get_layer: give a name or an index, exactly one")
        if index is not None:
            layers = self.layers
            if not -len(layers) <= index < len(layers):
                raise errors.IndexError(f"get_layer: index {index} is out of range; the model "
                                        f"has {len(layers)} layers")
            return layers[index]
        paths = dict(self.named_layers())
        for path, layer in paths.items():
            if path and layer.name == name:
                return layer
        if name in paths and name:
            return paths[name]
        known = [layer.name or path for path, layer in paths.items() if path]
        raise errors.ValueError(f"get_layer: no layer named {name!r}; the layers are {known}")

    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False,
                show_trainable=False):
        """Prints Keras's table of the layers (name and type, output shape, parameter
        count; "Connected to" for a functional graph that is not a chain), then the totals
        of trainable and non-trainable parameters and their memory. Output shapes are those
        of the last call (or of compile with placeholders). ``print_fn`` receives the whole
        text instead of it being printed; ``expand_nested`` lists the layers inside nested
        models."""
        from .summary import print_summary
        print_summary(self, line_length, positions, print_fn, expand_nested, show_trainable)

    # ---- checkpoints ------------------------------------------------------------------

    def save_states(self, fpath, aux_states=None, format="hl", overwrite=True):
        """Writes every state (parameters and buffers) and ``aux_states`` (epoch, learning
        rate, an optimiser, tensors, arrays, dicts and lists of these) to one zip file,
        atomically. ``format="singa"`` writes SINGA's own checkpoint layout.
        ``overwrite=False`` refuses an existing file, as SINGA does."""
        from ..checkpoint import singa, states
        if format == "hl":
            states.save(self, fpath, aux_states, overwrite)
        elif format == "singa":
            singa.save(self, fpath, aux_states, overwrite)
        else:
            raise errors.ValueError(f"save_states: format must be 'hl' or 'singa', got "
                                    f"{format!r}")

    def load_states(self, fpath, strict=True):
        """Restores the states saved by save_states (either format, recognised from the file)
        onto this module's device, and returns the auxiliary values as a dict; an optimiser
        comes back as its states (``optim.set_states(aux["optim"])``). Missing, unexpected or
        mis-shaped names raise hl.errors.CheckpointError listing them and load nothing;
        ``strict=False`` loads what matches and warns about the rest."""
        from ..checkpoint import states
        return states.load(self, fpath, strict)


def _module_init(module):
    d = module.__dict__
    d["_compiled"] = False
    d["stop_training"] = False
    d["graph_mode"] = False
