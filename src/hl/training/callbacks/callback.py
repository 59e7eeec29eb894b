"""Callback: Keras's hooks into fit / evaluate / predict; CallbackList fires them."""

HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
         "on_train_batch_begin", "on_train_batch_end", "on_test_begin", "on_test_end",
         "on_test_batch_begin", "on_test_batch_end", "on_predict_begin", "on_predict_end",
         "on_predict_batch_begin", "on_predict_batch_end")


class Callback:
    """Subclass and override the hooks you need. ``self.model`` is the model being trained
    (set ``self.model.stop_training = True`` to end fit after the current batch's epoch
    bookkeeping); ``self.params`` holds ``verbose``, ``epochs`` and ``steps`` (batches per
    epoch, None when unknown).

    ``logs`` dicts: at a train batch's end, the running means over the epoch so far ('loss'
    and each metric); at an epoch's end, the epoch's values plus 'val_*' ones when there is
    validation data; at a test batch's end, the running evaluation values."""

    main_rank_only = False  # True: in data-parallel training only rank 0 runs it (prints, files)

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        pass

    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass


class CallbackList:
    """Fires each hook on every callback that overrides it, in order. Hooks nobody overrides
    cost one empty loop, so per-batch hooks stay cheap."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                from ... import errors
                raise errors.ValueError(f"callbacks must be hl.callbacks.Callback objects, got "
                                        f"{type(cb).__name__}")
            cb.set_model(model)
            cb.set_params(params)
        self._bound = {hook: [fn for fn in (getattr(cb, hook) for cb in self.callbacks)
                              if getattr(fn, "__func__", None) is not getattr(Callback, hook)]
                       for hook in HOOKS}

    def __iter__(self):
        return iter(self.callbacks)


def _hook(name):
    def fire(self, *args):
        for fn in self._bound[name]:
            fn(*args)
    fire.__name__ = name
    return fire


for _name in HOOKS:
    setattr(CallbackList, _name, _hook(_name))
