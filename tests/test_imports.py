"""Import cycles in hl, function-level imports included (issue 19's "layers only call down").

The goal is no cycle at all. Until the last ones are untangled, this test pins the cycles that
remain (KNOWN below): a new module joining a cycle, or a new cycle, fails it, and so does a
cycle that is gone, so that KNOWN only ever shrinks. Imports are read from the source (ast),
so an import inside a function counts as much as one at the top of a file.
"""
import ast
import os

import hl

PACKAGE = os.path.dirname(os.path.abspath(hl.__file__))

# Each set: modules that import one another in a ring (strongly connected components of the
# import graph). Remove a set when its cycle is broken; never add one.
KNOWN = [
    {"hl.checkpoint.singa", "hl.checkpoint.states", "hl.checkpoint.weights", "hl.layers.layer",
     "hl.layers.merge", "hl.layers.symbolic", "hl.layers.torch_api"},
    {"hl", "hl.checkpoint.pickling", "hl.distributed", "hl.distributed.dist_opt",
     "hl.distributed.world", "hl.distribution", "hl.model", "hl.model.functional",
     "hl.model.module", "hl.model.sequential", "hl.model.summary", "hl.opt",
     "hl.training.checks", "hl.training.config", "hl.training.distributed",
     "hl.training.step", "hl.training.trainer"},
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


def import_graph(mods):
    """{module: modules it imports}. `from X import name` counts as importing X.name when that
    is a module, else X (the package's __init__ defines the name)."""
    edges = {m: set() for m in mods}
    for m, path in mods.items():
        package = m if path.endswith("__init__.py") else m.rpartition(".")[0]
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1])
                    target = base + ("." + node.module if node.module else "")
                else:
                    target = node.module or ""
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    edges[m].add(full if full in mods else target)
            elif isinstance(node, ast.Import):
                edges[m].update(a.name for a in node.names)
        edges[m] = {t for t in edges[m] if t in mods and t != m}
    return edges


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


def test_the_finder_sees_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [{"a", "b", "c"}]


def test_no_new_import_cycles():
    found = cycles(import_graph(modules()))
    new = [sorted(c) for c in found if c not in KNOWN]
    gone = [sorted(c) for c in KNOWN if c not in found]
    assert not new, f"import cycles not in KNOWN (break them; imports only go downward): {new}"
    assert not gone, f"these cycles are gone or changed: update KNOWN in {__file__}: {gone}"
