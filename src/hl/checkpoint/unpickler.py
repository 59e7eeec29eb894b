"""The unpickler behind ``hl.load(path)`` for files from anywhere (``trusted=False``).

A pickle is a program: its opcodes name globals, call them (REDUCE, NEWOBJ, INST, OBJ), call
``__setstate__`` or set attributes and slots (BUILD), and call ``append``/``extend``/
``__setitem__``/``add`` on whatever is on the stack (APPEND(S), SETITEM(S), ADDITEMS). Each of
those is a way to run code or to reach inside objects, so each is checked here, on Python's
own opcode interpreter (pickle._Unpickler; model.pkl holds no tensor data, so its speed does
not matter):

- globals: classes only (hl's own, subclasses of its extension points from modules already
  imported, builtin containers and numbers, numpy arrays, dtypes and scalars, and what the
  caller passes in ``allowed=``), plus hl's dtype singletons. Never a module-level function or
  a method: a function named by a file comes back only if the caller allowed it, and then as
  a value that nothing in loading calls.
- calls (REDUCE, INST, OBJ): only the reconstruction paths hl's and numpy's pickles write
  (RECONSTRUCTORS: each with a check of its arguments), and classes the caller allowed.
- new objects (NEWOBJ, NEWOBJ_EX): by the nearest C ``__new__`` of an admitted class (a Python
  ``__new__`` is not run, and takes no arguments from a file); never a Tensor, which comes only from a reference to a
  dataset whose dtype, shape and byte size are checked (pickling.py).
- BUILD: only on an object this load created (never on a tensor, a dtype singleton or any
  other shared object), through the class's ``__setstate__`` when it has one (hl's own check
  every field: Generator, Optimizer, ONNXModel), otherwise by setting its ``__dict__``; slots
  are never set from a file (hl's slotted classes hold the core's handles and dtypes).
- container opcodes: only on builtin lists, dicts and sets, and on objects this load created
  whose method is a C function (OrderedDict, deque, numpy arrays).
- extension codes (EXT1/2/4) are refused.
Anything else raises UnsafeCheckpointError naming the global or the opcode.
"""
import builtins
import collections
import numbers
import pickle
import sys
import types

import numpy as np

from .. import errors

_BUILTIN_TYPES = {name: getattr(builtins, name) for name in (
    "dict", "list", "tuple", "set", "frozenset", "int", "float", "complex", "bool", "str",
    "bytes", "bytearray", "slice", "range", "object")}
_NUMPY = {("numpy", "dtype"): np.dtype, ("numpy", "ndarray"): np.ndarray}
_NUMPY_FUNCTIONS = {}  # numpy's reconstruction functions, by every module name numpy used
for _mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
    for _name in ("_reconstruct", "scalar"):
        _NUMPY_FUNCTIONS[(_mod, _name)] = (_mod.rsplit(".", 1)[0], _name)
for _mod in ("numpy.core.numeric", "numpy._core.numeric"):
    _NUMPY_FUNCTIONS[(_mod, "_frombuffer")] = (_mod, "_frombuffer")
_HL_DENIED = ("hl._core", "hl._build", "hl._hl_core", "hl.checkpoint", "hl.data", "hl.demo")
_COLLECTIONS = {("collections", "OrderedDict"): collections.OrderedDict,
                ("collections", "deque"): collections.deque,
                ("collections", "defaultdict"): collections.defaultdict}


def _numpy_function(key):
    module, name = _NUMPY_FUNCTIONS[key]
    mod = sys.modules.get(module) or sys.modules.get(module.replace("_core", "core"))
    fn = getattr(mod, name, None) if mod is not None else None
    if fn is None:  # the other spelling of numpy's private module
        for alt in ("numpy._core.multiarray", "numpy.core.multiarray", "numpy._core.numeric",
                    "numpy.core.numeric"):
            fn = getattr(sys.modules.get(alt), name, None)
            if fn is not None:
                break
    return fn


def _extension_points():
    from ..layers.layer import Layer
    from ..losses import Loss
    from ..metrics import Metric
    from ..opt.optimizer import Optimizer
    from ..opt.schedules import Schedule
    return (Layer, Optimizer, Schedule, Loss, Metric)


def _resolve(module, qualname):
    """module.qualname in an already imported module, walking classes only (so never a
    method), or None."""
    obj = sys.modules.get(module)
    for i, part in enumerate(qualname.split(".")):
        if obj is None or (i > 0 and not isinstance(obj, type)):
            return None
        obj = obj.__dict__.get(part) if isinstance(obj, (types.ModuleType, type)) else None
    return obj


def _is_c_function(f):
    return isinstance(f, (types.BuiltinFunctionType, types.WrapperDescriptorType,
                          types.MethodDescriptorType, types.MethodWrapperType))


class RestrictedUnpickler(pickle._Unpickler):
    """``reader`` supplies ``path`` and ``error``; ``persistent`` loads a tensor reference."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file, reader, persistent, allowed=()):
        super().__init__(file)
        self.reader, self._persistent = reader, persistent
        self.allowed = {}
        for a in allowed:
            if not hasattr(a, "__qualname__") or not hasattr(a, "__module__"):
                raise errors.ValueError(f"hl.load: allowed= takes classes and functions, got "
                                        f"{a!r}")
            self.allowed[(a.__module__, a.__qualname__)] = a
        self._fresh = {}  # id -> object created by this load (kept alive, so ids stay unique)

    # ---- globals ----------------------------------------------------------------------

    def find_class(self, module, name):
        key = (module, name)
        if key in self.allowed:
            return self.allowed[key]
        if module in ("builtins", "__builtin__") and name in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[name]
        if key in _COLLECTIONS:
            return _COLLECTIONS[key]
        if key in _NUMPY:
            return _NUMPY[key]
        if key in _NUMPY_FUNCTIONS:
            fn = _numpy_function(key)
            if fn is not None:
                return fn
        if module == "numpy" and isinstance(getattr(np, name, None), type) and \
                issubclass(getattr(np, name), np.generic):
            return getattr(np, name)
        if module == "hl" or module.startswith("hl."):
            return self._hl_global(module, name)
        if module not in sys.modules:
            self.refuse(f"{module}.{name}", f"its module '{module}' is not imported, and "
                        f"loading never imports a module a file names (an import runs code). "
                        f"Import it yourself first if you trust it")
        obj = _resolve(module, name)
        if isinstance(obj, type) and issubclass(obj, _extension_points()):
            return obj
        self.refuse(f"{module}.{name}", "it is not on the allow-list")

    def _hl_global(self, module, name):
        from ..dtypes import DType
        obj = _resolve(module, name)
        if isinstance(obj, DType) and module == "hl.dtypes":
            return obj  # the dtype singletons
        if module == "hl.dtypes" and name == "dtype":
            return obj  # DType's own reconstruction path: REDUCE checks its one argument
        if isinstance(obj, type) and obj.__qualname__ == name and \
                obj.__module__.split(".")[0] == "hl":
            if not module.startswith(_HL_DENIED) and not obj.__module__.startswith(_HL_DENIED):
                return obj
            if issubclass(obj, _extension_points()):
                return obj  # a model class defined in a denied module (hl.demo's CNN)
        why = ("it is a function, and loading never calls nor hands back a function a file "
               "names" if callable(obj) and not isinstance(obj, type) else
               "it is not one of hl's classes")
        self.refuse(f"{module}.{name}", why)

    def refuse(self, what, why):
        raise errors.UnsafeCheckpointError(
            f"hl.load: {self.reader.path}: refusing the global '{what}': {why}. hl.load "
            f"allows hl's classes, builtin containers and numbers, numpy arrays and dtypes, "
            f"and subclasses of hl.Layer / hl.Module (and Optimizer, Schedule, Loss, Metric) "
            f"from imported modules. To allow it, pass allowed=[{what.split('.')[-1]}]; if "
            f"you trust this file completely, pass trusted=True", global_name=what)

    def refuse_op(self, opcode, why):
        raise errors.UnsafeCheckpointError(
            f"hl.load: {self.reader.path}: refusing the pickle opcode {opcode}: {why}. If you "
            f"trust this file completely, pass trusted=True", global_name=opcode)

    def persistent_load(self, pid):
        return self._persistent(pid)

    # ---- calls ------------------------------------------------------------------------

    def _fresh_object(self, obj):
        self._fresh[id(obj)] = obj
        return obj

    def _call(self, opcode, func, args):
        if not isinstance(args, tuple):
            self.refuse_op(opcode, f"its arguments are a {type(args).__name__}, not a tuple")
        allowed = isinstance(func, type) and self.allowed.get(
            (func.__module__, func.__qualname__)) is func
        check = None if allowed else _reconstructor(func)
        if not allowed and check is None:
            self.refuse_op(opcode, f"it calls {_name(func)}, which is not one of the "
                                   f"reconstruction paths hl and numpy write")
        if check is not None:
            problem = check(args)
            if problem:
                self.refuse_op(opcode, f"{_name(func)}{_short(args)}: {problem}")
        obj = func(*args)
        from .. import dtypes as _dt
        return obj if func is _dt.dtype else self._fresh_object(obj)  # singletons stay shared

    def load_reduce(self):
        args = self.stack.pop()
        self.stack[-1] = self._call("REDUCE", self.stack[-1], args)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_inst(self):
        module = self.readline()[:-1].decode("ascii")
        name = self.readline()[:-1].decode("ascii")
        cls = self.find_class(module, name)
        self.append(self._call("INST", cls, tuple(self.pop_mark())))
    dispatch[pickle.INST[0]] = load_inst

    def load_obj(self):
        args = self.pop_mark()
        if not args:
            self.refuse_op("OBJ", "it has no class")
        self.append(self._call("OBJ", args[0], tuple(args[1:])))
    dispatch[pickle.OBJ[0]] = load_obj

    def _new(self, opcode, cls, args, kwargs):
        from .._tensor import Tensor
        if not isinstance(cls, type):
            self.refuse_op(opcode, f"{_name(cls)} is not a class")
        if issubclass(cls, Tensor):
            self.refuse_op(opcode, "it makes a Tensor from nothing; tensors come only from "
                                   "references to their datasets")
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            self.refuse_op(opcode, "its arguments are not a tuple and a dict")
        new = cls.__new__
        if not _is_c_function(new):
            # A Python __new__ (Model's, which turns Model(inputs=..., outputs=...) into a
            # Functional) is not run: the object comes from the nearest C __new__ of its
            # bases, as an argument-less __new__ would make it.
            if args or kwargs:
                self.refuse_op(opcode, f"{_name(cls)} has a __new__ of its own, which "
                                       f"loading does not run with a file's arguments")
            new = next(k.__dict__["__new__"] for k in cls.__mro__
                       if "__new__" in k.__dict__ and _is_c_function(k.__dict__["__new__"]))
        return self._fresh_object(new(cls, *args, **kwargs))

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new("NEWOBJ", cls, args, {}))
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new("NEWOBJ_EX", cls, args, kwargs))
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_ext(self):
        self.refuse_op("EXT", "extension codes name globals outside the file")
    for _op in (pickle.EXT1, pickle.EXT2, pickle.EXT4):
        dispatch[_op[0]] = load_ext
    del _op

    # ---- BUILD --------------------------------------------------------------------------

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if self._fresh.get(id(inst)) is not inst:
            self.refuse_op("BUILD", f"it sets the fields of a {_name(type(inst))} this load "
                                    f"did not create (a tensor, a dtype, a shared object)")
        setstate = getattr(type(inst), "__setstate__", None)  # never the instance's own
        if setstate is not None:
            if not (_is_c_function(setstate) or _admitted_setstate(type(inst), self.allowed)):
                self.refuse_op("BUILD", f"{_name(type(inst))}.__setstate__ is not one hl "
                                        f"checks")
            setstate(inst, state)
            return
        if isinstance(state, tuple) and len(state) == 2:
            state, slotstate = state
            if slotstate:
                self.refuse_op("BUILD", f"it sets slots of a {_name(type(inst))}")
        if state:
            if not isinstance(state, dict) or not hasattr(inst, "__dict__"):
                self.refuse_op("BUILD", f"a {_name(type(inst))} takes no such state")
            for k, v in state.items():
                if type(k) is not str:
                    self.refuse_op("BUILD", f"the attribute name {k!r} is not a string")
                inst.__dict__[sys.intern(k)] = v
    dispatch[pickle.BUILD[0]] = load_build

    # ---- container opcodes ---------------------------------------------------------------

    def _target(self, opcode, obj, method):
        if type(obj) in (list, dict, set):
            return
        if self._fresh.get(id(obj)) is not obj or \
                not _is_c_function(getattr(type(obj), method, None)):
            self.refuse_op(opcode, f"it calls {method} of a {_name(type(obj))}")

    def load_append(self):
        value = self.stack.pop()
        self._target("APPEND", self.stack[-1], "append")
        self.stack[-1].append(value)
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        items = self.pop_mark()
        self._target("APPENDS", self.stack[-1], "extend")
        self.stack[-1].extend(items)
    dispatch[pickle.APPENDS[0]] = load_appends

    def load_setitem(self):
        value = self.stack.pop()
        key = self.stack.pop()
        self._target("SETITEM", self.stack[-1], "__setitem__")
        self.stack[-1][key] = value
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        self._target("SETITEMS", target, "__setitem__")
        for i in range(0, len(items) - 1, 2):
            target[items[i]] = items[i + 1]
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_additems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        self._target("ADDITEMS", target, "add")
        for item in items:
            target.add(item)
    dispatch[pickle.ADDITEMS[0]] = load_additems


def _admitted_setstate(cls, allowed):
    """hl's classes check their state (Generator, Optimizer, ONNXModel); a user class's own
    __setstate__ is its own reconstruction path, admitted with its class."""
    for klass in cls.__mro__:
        if "__setstate__" in klass.__dict__:
            if klass.__module__.split(".")[0] == "hl":
                return getattr(klass.__dict__["__setstate__"], "checks_its_state", False)
            return True
    return False


def _name(obj):
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def _short(args):
    text = repr(args)
    return text if len(text) < 80 else text[:77] + "..."


# ---- the calls pickles of hl's objects make, with their arguments checked -----------------

def _args_of(types_, n_min=None):
    n_min = len(types_) if n_min is None else n_min

    def check(args):
        if not n_min <= len(args) <= len(types_):
            return f"takes {n_min} to {len(types_)} arguments"
        for a, t in zip(args, types_):
            if not isinstance(a, t):
                return f"the argument {a!r} is not a {t}"
        return None
    return check


def _check_dtype(args):
    if not 1 <= len(args) <= 3 or not isinstance(args[0], str) or \
            any(not isinstance(a, bool) for a in args[1:]):
        return "takes a type code and two flags"
    if len(args) == 3 and not args[2]:
        return "it asks for a shared dtype (copy=False), which BUILD would then change"
    return None


def _check_reconstruct(args):
    if len(args) != 3 or args[0] is not np.ndarray or not isinstance(args[1], tuple) or \
            not isinstance(args[2], bytes):
        return "takes numpy.ndarray, a shape and a type code"
    return None


def _check_scalar(args):
    if len(args) not in (1, 2) or not isinstance(args[0], np.dtype) or \
            (len(args) == 2 and args[0].kind != "O" and not isinstance(args[1], bytes)):
        return "takes a dtype and its bytes"
    if len(args) == 2 and args[0].kind != "O" and len(args[1]) != args[0].itemsize:
        return f"{len(args[1])} bytes for a {args[0]} scalar of {args[0].itemsize}"
    return None


def _check_frombuffer(args):
    if len(args) != 4 or not isinstance(args[0], (bytes, bytearray, pickle.PickleBuffer)) or \
            not isinstance(args[1], np.dtype) or not isinstance(args[2], tuple) or \
            args[1].kind == "O":
        return "takes bytes, a dtype, a shape and an order"
    n = int(np.prod([int(s) for s in args[2]], dtype=object)) if args[2] else 1
    if n * args[1].itemsize != memoryview(args[0]).nbytes:
        return f"shape {args[2]} of {args[1]} does not match {memoryview(args[0]).nbytes} bytes"
    return None


def _check_defaultdict(args):
    if len(args) > 1 or (args and args[0] is not None and args[0] not in
                         _BUILTIN_TYPES.values()):
        return "its default factory must be None or a builtin container or number type"
    return None


def _check_deque(args):
    if len(args) > 2 or (args and not isinstance(args[0], (list, tuple))) or \
            (len(args) == 2 and args[1] is not None and type(args[1]) is not int):
        return "takes items and a maximum length"
    return None


def _check_device(args):
    if len(args) != 2 or args[0] not in ("cpu", "cuda") or type(args[1]) is not int or \
            not 0 <= args[1] < 1024:
        return "takes 'cpu' or 'cuda' and a device index"
    return None


def _check_dtype_name(args):
    from .. import dtypes as _dt
    if len(args) != 1 or not isinstance(args[0], str) or \
            not isinstance(getattr(_dt, args[0], None), _dt.DType):
        return "takes the name of one of hl's dtypes"
    return None


def _check_policy_name(args):
    from .. import mixed_precision as _mp
    if len(args) != 1 or args[0] not in _mp.POLICY_NAMES:
        return "takes the name of one of hl's dtype policies"
    return None


def _reconstructor(func):
    """The argument check for a call a pickle may make, or None if it may not make it."""
    from .. import dtypes as _dt
    from .. import mixed_precision as _mp
    from ..devices import Device
    b = _BUILTIN_TYPES
    table = {
        b["complex"]: _args_of((numbers.Real, numbers.Real), 0),
        b["slice"]: _args_of((object, object, object), 1),
        b["range"]: _args_of((int, int, int), 1),
        b["set"]: _args_of((list,), 0), b["frozenset"]: _args_of((list,), 0),
        b["bytearray"]: _args_of((bytes,), 0), b["bytes"]: _args_of((), 0),
        b["object"]: _args_of((), 0),
        collections.OrderedDict: _args_of((), 0), collections.deque: _check_deque,
        collections.defaultdict: _check_defaultdict,
        np.dtype: _check_dtype, Device: _check_device, _dt.dtype: _check_dtype_name,
        _mp.Policy: _check_policy_name,  # a layer's dtype_policy
    }
    for key in _NUMPY_FUNCTIONS:
        fn = _numpy_function(key)
        if fn is not None:
            table[fn] = {"_reconstruct": _check_reconstruct, "scalar": _check_scalar,
                         "_frombuffer": _check_frombuffer}[key[1]]
    try:
        return table.get(func)
    except TypeError:  # unhashable
        return None
