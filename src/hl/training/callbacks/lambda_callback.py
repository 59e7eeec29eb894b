"""LambdaCallback: a callback from plain functions."""
from ... import errors
from .callback import HOOKS, Callback


class LambdaCallback(Callback):
    """``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``: each keyword is a hook name
    (on_train_begin, on_epoch_end, on_train_batch_end, on_test_*, on_predict_*, ...) and its
    function, called with the hook's arguments."""

    def __init__(self, **hooks):
        super().__init__()
        for name, fn in hooks.items():
            if name not in HOOKS:
                raise errors.ValueError(f"LambdaCallback: unknown hook {name!r}; hooks are "
                                        f"{list(HOOKS)}")
            if fn is not None:
                setattr(self, name, fn)
