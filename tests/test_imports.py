"""hl's import graph: no cycle, and every import goes down the layers (issue 19's "layers
only call down").

LAYERS below is the one written statement of hl's layering (docs/design-notes.md, "Layers and
imports", explains it and points here). Imports are read from the source with ast, so an
import inside a function counts as much as one at the top of a file, and so does
``importlib.import_module`` with a literal name. Importing ``hl.a.b`` runs ``hl/a/__init__.py``
first, so it also counts as importing the package ``hl.a`` (unless the importer is inside it).
"""
import ast
import os

import pytest

import hl

PACKAGE = os.path.dirname(os.path.abspath(hl.__file__))

# Bottom up. A module may import modules of its own layer and of the layers below it, never
# above; an entry covers a module and everything under it, except "hl", which is the root
# namespace alone (hl/__init__.py: it assembles the public API from everything beneath it).
# The most specific entry wins (hl.checkpoint.pickling sits above hl.checkpoint).
LAYERS = [
    ("foundations", ["hl.errors", "hl.dtypes", "hl._grad_state", "hl._build", "hl._cuda_libs"]),
    ("the cffi binding of libcore", ["hl._core"]),
    ("the thread pool's loop records, for profiling", ["hl._pool_trace"]),
    ("the CUDA library's NCCL glue, through ctypes", ["hl._nccl"]),
    ("devices", ["hl.devices"]),
    ("tensors", ["hl._tensor"]),
    ("graph mode's plan cache and recording hooks", ["hl.graph"]),
    ("ops and autograd", ["hl.ops", "hl.autograd"]),
    ("losses, metrics, optimisers, data sets, mixed precision",
     ["hl.losses", "hl.metrics", "hl.opt", "hl.data", "hl.amp", "hl.mixed_precision"]),
    ("states and weight files", ["hl.checkpoint"]),
    ("layers", ["hl.layers"]),
    ("data parallelism", ["hl.distributed", "hl.distribution"]),
    ("the training loop (Keras's Trainer)", ["hl.training", "hl.callbacks"]),
    ("models", ["hl.model"]),
    ("whole-model files (hl.save / hl.load know every class)",
     ["hl.checkpoint.pickling", "hl.checkpoint.unpickler"]),
    ("the hl namespace", ["hl"]),
    ("front doors", ["hl.onnx", "hl.sonnx", "hl.v2", "hl.singa", "hl.demo"]),
]


def modules():
    """{module name: file} for every module of the package."""
    root = os.path.dirname(PACKAGE)
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _absolute(name, level, package):
    if not level:
        return name or ""
    parts = package.split(".")
    base = ".".join(parts[:len(parts) - level + 1])
    return base + ("." + name if name else "")


def _ancestors(name):
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_graph(mods):
    """{module: modules importing it runs}. `from X import name` counts as importing X.name
    when that is a module, else X (the package's __init__ defines the name); importing X.Y
    also runs the packages above it that the importer is not itself inside."""
    edges = {m: set() for m in mods}
    for m, path in mods.items():
        package = m if path.endswith("__init__.py") else m.rpartition(".")[0]
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(node.module, node.level, package)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in mods else base)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) ==
                  "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                name = node.args[0].value
                level = len(name) - len(name.lstrip("."))
                targets.add(_absolute(name[level:], level, package))
        running = _ancestors(m) | {m}
        for t in set(targets):
            targets.update(_ancestors(t) - running)
        edges[m] = {t for t in targets if t in mods and t != m}
    return edges


def layer_of(module):
    """The index in LAYERS of the most specific entry covering `module`, or None."""
    best, best_len = None, -1
    for i, (_, names) in enumerate(LAYERS):
        for n in names:
            covers = module == n or (n != "hl" and module.startswith(n + "."))
            if covers and len(n) > best_len:
                best, best_len = i, len(n)
    return best


def cycles(edges):
    """The strongly connected components with more than one module (Tarjan's algorithm,
    iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def ring(edges, component):
    """One shortest import path from the component's first module back to itself, as
    'a -> b -> a' (where to cut)."""
    start = min(component)
    parent, frontier = {start: None}, [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v] & component):
                if w == start:  # back: walk the parents from v to start
                    path = [start]
                    while v is not None:
                        path.append(v)
                        v = parent[v]
                    return " -> ".join(reversed(path))
                if w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not a cycle")


def upward(edges):
    """'a -> b (layer of a < layer of b)' for every import that goes up."""
    out = []
    for m in sorted(edges):
        for t in sorted(edges[m]):
            if layer_of(t) > layer_of(m):
                out.append(f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} "
                           f"({LAYERS[layer_of(t)][0]})")
    return out


@pytest.fixture(scope="module")
def graph():
    return import_graph(modules())


def test_the_finder_sees_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [{"a", "b", "c"}]


def test_the_walker_sees_function_level_and_package_imports(tmp_path):
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "low.py").write_text("def f():\n    from .. import high\n")
    (pkg / "high.py").write_text("import importlib\n"
                                 "importlib.import_module('.sub.low', __package__)\n")
    mods = {"p": str(pkg / "__init__.py"), "p.sub": str(pkg / "sub" / "__init__.py"),
            "p.sub.low": str(pkg / "sub" / "low.py"), "p.high": str(pkg / "high.py")}
    edges = import_graph(mods)
    assert edges["p.sub.low"] == {"p.high"}          # a function-level import
    assert edges["p.high"] == {"p.sub.low", "p.sub"}  # import_module, and the package it runs
    assert cycles(edges) == [{"p.sub.low", "p.high"}]
    assert ring(edges, {"p.sub.low", "p.high"}) == "p.high -> p.sub.low -> p.high"


def test_every_module_has_a_layer(graph):
    placed = [m for m in graph if layer_of(m) is None]
    assert not placed, f"place these modules in LAYERS in {__file__}: {placed}"


def test_no_import_cycles(graph):
    found = [ring(graph, c) for c in cycles(graph)]
    assert not found, ("import cycles (break them: move what both need down a layer, pass "
                       "objects in, or let the higher module register itself):\n" +
                       "\n".join(found))


def test_imports_only_go_down(graph):
    up = upward(graph)
    assert not up, "imports going up the layers (LAYERS in " + __file__ + "):\n" + "\n".join(up)


def cffi_uses(mods):
    """'module:line' for each place outside hl._core and the build script that imports cffi
    or the compiled module, or takes ffi / lib from hl._core."""
    found = []
    for m, path in mods.items():
        if m in ("hl._core", "hl._build"):
            continue
        package = m if path.endswith("__init__.py") else m.rpartition(".")[0]
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node.module, node.level, package)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute):  # _core.ffi, _core.lib
                names = [f"{getattr(node.value, 'id', '')}.{node.attr}"]
            else:
                continue
            if any(n.split(".")[0] == "cffi" or "_hl_core" in n or
                   n.endswith(("_core.ffi", "_core.lib")) for n in names):
                found.append(f"{m}:{node.lineno}")
    return found


def test_only_the_binding_touches_cffi(tmp_path):
    """DESIGN.md: nothing above hl._core touches cffi objects."""
    probe = tmp_path / "probe.py"
    probe.write_text("from ._core import lib\nimport cffi\n\n\ndef f(_core):\n"
                     "    return _core.ffi\n")
    assert cffi_uses({"hl.probe": str(probe)}) == ["hl.probe:1", "hl.probe:2", "hl.probe:6"]
    found = cffi_uses(modules())
    assert not found, f"cffi reached outside hl._core: {found}"
