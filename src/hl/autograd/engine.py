"""Reverse mode: walking the recorded ops back from a loss.

``backward(loss, dy)`` is a generator (SINGA's design): it yields ``(tensor, grad)`` for each
tensor that stores gradients as soon as that gradient is complete, so an optimiser can update
a parameter while the rest of the backward pass goes on. ``Tensor.backward()`` (PyTorch's
design) runs the same walk and accumulates into ``.grad`` of every leaf that requires it.

The walk counts, for each op, how many later ops consume its outputs; an op runs its backward
once all of them have handed it their gradients. Each op drops what it saved as soon as its
backward has run, so activations are freed during the pass, not after it.
"""
from .. import _core, errors, ops
from .mode import state as _grad

_unary, _binary, _select = ops.elementwise.unary, ops.elementwise.binary, ops.elementwise.select


def backward(loss, dy=None, retain_graph=False, into=None):
    """Yields (tensor, gradient) for every tensor with ``stores_grad`` that ``loss`` depends
    on (parameters, and intermediates marked with ``stores_grad = True``). ``dy`` is the
    gradient of the loss (ones of its shape by default).

    ``into`` ({id(leaf): tensor}) gives leaves a destination: that leaf's gradient is written
    there and the destination itself is yielded (DistOpt's gradient buckets, PyTorch DDP's
    gradient_as_bucket_view). The op making the gradient writes it there directly where it
    can (Function.grad_into), else the engine copies it in; further contributions to the
    same leaf are added in place. A destination is contiguous, of the leaf's shape, and
    nothing else reads it during the walk; one whose dtype or device is not (or no longer)
    the leaf's is not used (the leaf gets a gradient of its own)."""
    for t, g, leaf in _walk(loss, dy, retain_graph, into):
        if t.stores_grad:
            yield t, g


def fill_grads(loss, dy=None, retain_graph=False):
    """Accumulates d(loss)/d(t) into ``t.grad`` for every leaf with ``requires_grad`` and every
    tensor with ``stores_grad`` (what ``loss.backward()`` does)."""
    if dy is None and loss.size != 1:
        raise errors.ValueError(
            f"backward(): the loss has shape {loss.shape}; a gradient can only be implied for "
            f"a single value. Pass the gradient of the loss: loss.backward(dy)")
    for t, g, leaf in _walk(loss, dy, retain_graph):
        if leaf or t.stores_grad:
            t.grad = g if t.grad is None else _binary("add", t.grad, g)


def _walk(loss, dy, retain_graph, into=None):
    if not loss.requires_grad:
        raise errors.ValueError(
            "backward(): the loss does not depend on any tensor that requires a gradient "
            "(were the parameters created with requires_grad, or was it computed under "
            "no_grad?)")
    given = dy is not None
    if dy is None:
        dy = ops.ones_like(loss)
    elif tuple(dy.shape) != tuple(loss.shape):
        raise errors.ShapeError(f"backward(): dy has shape {tuple(dy.shape)}, the loss "
                                f"{tuple(loss.shape)}")
    root = loss.creator
    if root is None:  # the loss is itself a leaf
        dest = into.get(id(loss)) if into else None
        if dest is not None:
            _core.copy_into(dest._h, dy._h)
            dy = dest
        yield loss, dy, True
        return
    if root.src is None:
        raise errors.ValueError(
            "backward(): this graph was already walked back and its saved tensors freed; "
            "pass retain_graph=True to the first backward to walk it twice")
    # a caller's dy stays the caller's: a gradient that is a view of it is copied when handed
    yield from _run(root, loss.out_index, dy, retain_graph, dy if given else None, into or None)


def _count_consumers(root):
    """For each op, how many edges lead into it from later ops; for each leaf, the same."""
    ops_waiting = {root: 0}
    leaves_waiting = {}
    stack = [root]
    while stack:
        fn = stack.pop()
        if fn.src is None:
            raise errors.ValueError(
                f"backward(): {fn.name} was already walked back and freed its saved tensors; "
                f"pass retain_graph=True to the first backward to walk a graph twice")
        for edge in fn.src:
            if edge is None:
                continue
            parent, x = edge
            if parent is None:
                leaves_waiting[id(x)] = leaves_waiting.get(id(x), 0) + 1
            elif parent in ops_waiting:
                ops_waiting[parent] += 1
            else:
                ops_waiting[parent] = 1
                stack.append(parent)
    return ops_waiting, leaves_waiting


def _run(root, index, dy, retain_graph, seed, into=None):
    waiting, leaves_waiting = _count_consumers(root)
    grads = {root: _slots(root)}
    grads[root][index] = dy
    leaf_grads = {}
    handed = set()
    fits = {}  # id(leaf) -> whether its destination has its dtype and device
    ready = [root]
    while ready:
        fn = ready.pop()
        dys = grads.pop(fn, None)
        src = fn.src
        if dys is None:
            # No gradient reached this op (its outputs only fed ops that pass none back, such
            # as comparisons): it passes none on, but still counts as done for its inputs.
            dxs = (None,) * len(src)
        else:
            for i, ref in enumerate(fn.outs):  # intermediates that asked to keep their grad
                y = ref()
                if y is not None and y.stores_grad and dys[i] is not None:
                    yield y, dys[i], False
            if len(dys) > 1 and any(g is None for g in dys):
                dys = [_zeros_for(fn, i) if g is None else g for i, g in enumerate(dys)]
            # Grad mode is off only inside backward, not across the yields: the caller's own
            # code between two pairs runs in whatever mode it chose.
            if into is not None:
                fn.grad_into = _offers(src, into, leaf_grads, fits)
            prev, _grad.enabled = _grad.enabled, False
            try:
                dxs = fn.backward(*dys)
            finally:
                _grad.enabled = prev
                if into is not None:  # a retained graph walked again without them
                    fn.grad_into = None
            if type(dxs) is not tuple:
                dxs = (dxs,)
        if len(dxs) != len(src):
            raise errors.InternalError(f"{fn.name}.backward returned {len(dxs)} gradients for "
                                       f"{len(src)} inputs")
        if not retain_graph:
            fn.release()
        for j, (edge, dx) in enumerate(zip(src, dxs)):
            if edge is None:
                continue
            parent, x = edge
            if parent is None:
                key = id(x)
                dest = _destination(into, x, fits) if into is not None else None
                if dx is not None:
                    g = leaf_grads.get(key)
                    if dest is not None:
                        leaf_grads[key] = _into_dest(dest, g, dx)
                    else:
                        leaf_grads[key] = _as_grad(dx, x) if g is None else _binary("add", g, dx)
                leaves_waiting[key] -= 1
                if leaves_waiting[key] == 0:
                    g = leaf_grads.pop(key, None)
                    if g is not None:
                        if dest is None:
                            # _live before _owned's arguments are built: an argument on the
                            # stack is one more reference to g (a needless copy, one more call)
                            live = _live(grads, leaf_grads, dxs, j, seed)
                            g = _owned(g, handed, live)
                        yield x, g, True
                continue
            if dx is not None:
                slots = grads.get(parent)
                if slots is None:
                    slots = grads[parent] = _slots(parent)
                g = slots[x]
                slots[x] = dx if g is None else _binary("add", g, dx)
            waiting[parent] -= 1
            if waiting[parent] == 0:
                ready.append(parent)


def _slots(fn):
    return [None] * len(fn.outs)


def _zeros_for(fn, i):
    """Zeros standing for the gradient of output i, which got none (the output itself may be
    gone, so its shape comes from what the op noted when it ran)."""
    shape, dtype, device = fn.out_specs[i]
    return ops.zeros(*shape, dtype=dtype, device=device)


def _destination(into, x, fits):
    """into's destination for leaf x, or None: also when x's dtype or device is not the
    destination's (a model cast or moved after DistOpt made its buckets), checked once per
    walk."""
    dest = into.get(id(x))
    if dest is None:
        return None
    ok = fits.get(id(x))
    if ok is None:
        ok = fits[id(x)] = (dest.dtype is x.dtype
                            and _core.device_of(dest._h) == _core.device_of(x._h))
    return dest if ok else None


def _offers(src, into, leaf_grads, fits):
    """Function.grad_into for an op about to run backward: per input, the destination of a
    leaf that has one and no gradient yet (a later contribution is added in place by the
    engine); a leaf that is several inputs of the op is offered only at its first."""
    offers, seen = None, None
    for j, edge in enumerate(src):
        if edge is None or edge[0] is not None:
            continue
        key = id(edge[1])
        dest = _destination(into, edge[1], fits)
        if dest is None or key in leaf_grads or (seen is not None and key in seen):
            continue
        if offers is None:
            offers, seen = [None] * len(src), set()
        offers[j] = dest
        seen.add(key)
    return offers


def _into_dest(dest, g, dx):
    """The leaf's gradient so far (g: None or dest) with dx added, in dest."""
    if g is not None:  # a second contribution (a weight used twice): added in place
        _binary("add", dest, dx, out=dest)
    elif not _is(dx, dest):  # the op made its own tensor: copied (and cast) in
        _core.copy_into(dest._h, dx._h)
    return dest


def _is(dx, dest):
    """dx is dest's memory (the op wrote there; perhaps handing back a reshaped view)."""
    return dx is dest or dx._h == dest._h or (
        dx.shape == dest.shape and dx.dtype is dest.dtype and dx.is_contiguous()
        and _core.shares_storage(dx._h, dest._h)
        and _core.offset(dx._h) == _core.offset(dest._h))


def _as_grad(dx, x):
    if dx.dtype is not x.dtype:
        dx = dx.astype(x.dtype)
    return dx



def _live(grads, leaf_grads, dxs, j, seed):
    """The tensors the walk still holds besides the gradient handed at position j of the
    current backward's results: gradients waiting in later ops' slots, other leaves'
    partial sums, the current op's other results and the caller's dy."""
    live = [g for slots in grads.values() for g in slots if g is not None]
    live.extend(leaf_grads.values())
    live.extend(dx for i, dx in enumerate(dxs) if i != j and dx is not None)
    if seed is not None:
        live.append(seed)
    return live


def _owned(g, handed, live):
    """A gradient the receiver may write into (DistOpt reduces gradients in place while
    backward goes on): not a broadcast or strided view (sum's backward hands out an expanded
    dy), not the same tensor as another leaf's, and sharing no memory with a tensor the walk
    still uses (add's backward passes one dy both to a parameter and to the op before it;
    reshape's passes a view of it). Any later gradient that could share its memory derives
    from one of those live tensors, so checking them at hand-out time is enough."""
    if (id(g) in handed or not g.is_contiguous()
            or any(t is g or t.shares_memory(g) for t in live)):
        g = g.clone()
    handed.add(id(g))
    return g
