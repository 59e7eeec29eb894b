"""hl's exceptions: one hierarchy for every failure the core or the Python layers report.

Each class also derives from the matching Python built-in, so ``except ValueError`` and
``except IndexError`` keep working in code written for numpy.
"""
import threading

_breaks = threading.local()


class HLError(Exception):
    """Base class of every hl error."""


class ShapeError(HLError, ValueError):
    """Shapes that do not fit the operation (broadcasting, matmul, reshape...)."""


class DTypeError(HLError, TypeError):
    """A dtype the operation does not take, or operands whose dtypes differ."""


class DeviceError(HLError, RuntimeError):
    """Tensors on different devices, or a device that is not available."""


class IndexError(HLError, IndexError):  # noqa: A001 - deliberately mirrors the built-in
    """An axis or an index out of range."""


class ValueError(HLError, ValueError):  # noqa: A001
    """An invalid argument value."""


class UnsupportedError(HLError, NotImplementedError):
    """A valid request that this build cannot carry out."""


class GraphBreak(UnsupportedError):
    """Something a plan cannot record met while recording one (graph mode): a read of a
    tensor's values on the host (``.numpy()``, ``.item()``, ``float(t)``), an op whose output
    shape depends on the data (nonzero, unique). Graph mode catches it and runs the step
    eagerly; ``.op`` names what broke the recording. ``transient``: only this step must run
    eagerly (an optimiser creating its slots); the next one is recorded again."""

    def __init__(self, message, op=None, transient=False):
        super().__init__(message)
        self.op = op
        self.transient = transient
        _breaks.count = graph_breaks() + 1


def graph_breaks():
    """How many GraphBreaks this thread has made: code that records ops it cannot run again
    itself (SINGA's dev.EnableGraph) compares it before and after to know that a break was
    raised (and maybe caught) in between, leaving its recording incomplete."""
    return getattr(_breaks, "count", 0)


class MemoryError(HLError, MemoryError):  # noqa: A001
    """An allocation failed."""


class InternalError(HLError, RuntimeError):
    """A bug in hl: please report it."""


class CheckpointError(ValueError):  # hl.errors.ValueError: except ValueError catches it
    """A checkpoint or saved model that cannot be written or read back as it should be: a
    truncated, corrupted or foreign file, names or shapes that do not match the model, a
    value that cannot be stored. The message names the file and the problem."""


class CheckpointIOError(CheckpointError, OSError):
    """Writing or reading a checkpoint failed in the operating system (no permission, no
    such folder, disk full). Both a CheckpointError and an OSError; the message names the
    user's path, never hl's temporary file."""


class UnsafeCheckpointError(CheckpointError):
    """A saved model whose pickle names a global outside hl.load's allow-list (os.system,
    eval, a module that would have to be imported...). ``.global_name`` is that name."""

    def __init__(self, message, global_name=None):
        super().__init__(message)
        self.global_name = global_name


class MissingDependencyError(HLError, ImportError):
    """An optional package a feature needs is not installed (matplotlib for History.plot);
    the message says what to install."""


class DistributedError(HLError, RuntimeError):
    """Data-parallel training cannot go on: another rank failed, died or did not answer
    within the timeout, or the ranks disagree (model, hl version). The message names the
    rank and what it was doing."""


class NonFiniteLossError(ValueError):  # hl.errors.ValueError
    """fit met a NaN or infinite loss and no callback (hl.callbacks.TerminateOnNaN) stopped
    training. The message names the epoch and batch."""


class ONNXError(ValueError):  # hl.errors.ValueError
    """An ONNX model hl cannot import or export as asked: it fails onnx.checker, a node's
    attributes or inputs are invalid, its graph has a cycle, its external data lies outside
    the model's folder. The message names the node (name, op type, opset) where one is at
    fault. Operators hl does not implement raise UnsupportedError instead."""
