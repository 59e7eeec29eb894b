"""Indexing operators: gathers and scatters (Gather, GatherElements, GatherND, Scatter,
ScatterElements, ScatterND, Compress, ReverseSequence), selection (TopK, ArgMax, ArgMin,
NonZero, Unique, OneHot), scans (CumSum, CumProd) and Einsum.

Index values are checked before a kernel reads with them: the core's gather and scatter
kernels check each index against its axis; where a handler turns several coordinates into
one flat index (GatherND, ScatterND) it checks them on the host first, since a coordinate out
of range could otherwise land on another, valid, element.

float16 and bfloat16 are held but not computed with on the CPU: the handlers that compute
(scans, reductions, comparisons) work in float32 and round the result back.
"""

import numpy as np

from ... import errors
from ...autograd.index import Gather, GatherElements, ScatterElements, TopK
from ...ops._util import norm_axis
from ..registry import exports, onnx_op
from ._util import axis_of, check_shape, const, F, HALF, prod


def _wide(x):
    """x in a dtype the CPU computes with (float32 for the half types)."""
    return F.cast(x, "float32") if x.dtype.name in HALF else x


def _host_indices(n, t, what="indices"):
    a = n.host(t)
    if a.dtype.kind not in "iu":
        raise n.error(f"{what} must be integers, got {a.dtype} with shape {a.shape}",
                      errors.DTypeError)
    return a.astype(np.int64)


def _check_coords(n, idx, dims, first_axis, data_shape):
    """Coordinates (the last axis of idx) checked against dims, the sizes of the data's axes
    first_axis, first_axis + 1...; negatives wrapped."""
    idx = idx.copy()
    for j, d in enumerate(dims):
        col = idx[..., j]
        bad = (col < -d) | (col >= d)
        if bad.any():
            v = int(col[bad].reshape(-1)[0])
            raise n.error(f"index {v} is out of range for axis {first_axis + j} of size {d} "
                          f"of the data {tuple(data_shape)} (valid indices are {-d} to "
                          f"{d - 1})", errors.IndexError)
        idx[..., j] = np.where(col < 0, col + d, col)
    return idx


def _flat_positions(coords, dims):
    """Row-major flat positions of coordinates (last axis) in a block of shape dims."""
    flat = np.zeros(coords.shape[:-1], dtype=np.int64)
    for j, d in enumerate(dims):
        flat = flat * d + coords[..., j]
    return flat


# ---- gathers ----------------------------------------------------------------------------

@onnx_op("Gather")
def gather(n, x, indices):
    axis = axis_of(n, n.attr("axis", 0), x.ndim)
    return F.gather(x, indices, axis)


@onnx_op("GatherElements")
def gather_elements(n, x, indices):
    axis = axis_of(n, n.attr("axis", 0), x.ndim)
    if indices.ndim != x.ndim:
        raise n.error(f"indices {tuple(indices.shape)} must have the rank of the data "
                      f"{tuple(x.shape)}", errors.ShapeError)
    return F.gather_elements(x, indices, axis)


@onnx_op("GatherND")
def gather_nd(n, x, indices):
    """Each index row names a slice of x: x is flattened to (batch * positions, rest) and
    gathered along its first axis at flat positions worked out on the host."""
    b = n.attr("batch_dims", 0)
    idx = _host_indices(n, indices)
    k = idx.shape[-1] if idx.ndim else -1
    if idx.ndim < 1 or b < 0 or b >= min(idx.ndim, x.ndim) or not 0 <= k <= x.ndim - b \
            or tuple(idx.shape[:b]) != tuple(x.shape[:b]):
        raise n.error(f"indices {idx.shape} do not fit data {tuple(x.shape)} with "
                      f"batch_dims={b}", errors.ShapeError)
    batch, dims, rest = x.shape[:b], x.shape[b:b + k], x.shape[b + k:]
    flat = _flat_positions(_check_coords(n, idx, dims, b, x.shape), dims)
    nb, npos = prod(batch), prod(dims)
    flat = flat.reshape(nb, -1) + (np.arange(nb, dtype=np.int64) * npos)[:, None]
    y = F.gather(F.reshape(x, nb * npos, *rest), const(flat.reshape(-1), like=x), 0)
    return F.reshape(y, *batch, *idx.shape[b:-1], *rest)


@onnx_op("Compress")
def compress(n, x, condition):
    cond = n.host(condition).reshape(-1).astype(bool)
    axis = n.attr("axis")
    if axis is None:
        x, axis = F.reshape(x, -1), 0
    else:
        axis = axis_of(n, axis, x.ndim)
    d = x.shape[axis]
    if cond[d:].any():  # numpy.compress: a longer condition may only add False
        raise n.error(f"condition of length {cond.size} selects past the end of axis {axis} "
                      f"of size {d}", errors.IndexError)
    keep = np.nonzero(cond[:d])[0].astype(np.int64)
    return F.gather(x, const(keep, like=x), axis)


@onnx_op("ReverseSequence")
def reverse_sequence(n, x, sequence_lens):
    batch_axis, time_axis = n.attr("batch_axis", 1), n.attr("time_axis", 0)
    if x.ndim < 2 or {batch_axis, time_axis} != {0, 1}:
        raise n.error(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 "
                      f"(in some order) of an input of 2 or more dimensions, got "
                      f"{tuple(x.shape)}", errors.ValueError)
    lens = np.array(n.ints(sequence_lens, "sequence_lens"), dtype=np.int64)
    nb, nt = x.shape[batch_axis], x.shape[time_axis]
    if lens.shape != (nb,) or (lens < 0).any() or (lens > nt).any():
        raise n.error(f"sequence_lens {lens.tolist()} must hold one length in [0, {nt}] per "
                      f"batch entry ({nb})", errors.ValueError)
    # src[b, t]: where output step t of sequence b comes from.
    t = np.arange(nt, dtype=np.int64)[None, :]
    src = np.where(t < lens[:, None], lens[:, None] - 1 - t, t)
    if time_axis == 0:
        src = src.T
    src = src.reshape(src.shape + (1,) * (x.ndim - 2))
    idx = const(np.broadcast_to(src, x.shape), like=x)
    return F.gather_elements(x, idx, time_axis)


# ---- scatters ---------------------------------------------------------------------------

def _scatter(n, x, indices, updates, axis, reduction):
    axis = axis_of(n, axis, x.ndim)
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise n.error(f"reduction {reduction!r} is not one of none, add, mul, max, min",
                      errors.ValueError)
    if indices.ndim != x.ndim or tuple(updates.shape) != tuple(indices.shape):
        raise n.error(f"indices {tuple(indices.shape)} and updates {tuple(updates.shape)} "
                      f"must have one shape, of the rank of the data {tuple(x.shape)}",
                      errors.ShapeError)
    if reduction in ("mul", "max", "min") and x.dtype.name in HALF:
        y = F.scatter_elements(_wide(x), indices, _wide(updates), axis, reduction)
        return F.cast(y, x.dtype)
    return F.scatter_elements(x, indices, updates, axis, reduction)


@onnx_op("ScatterElements")
def scatter_elements(n, x, indices, updates):
    return _scatter(n, x, indices, updates, n.attr("axis", 0), n.attr("reduction", "none"))


@onnx_op("Scatter")
def scatter(n, x, indices, updates):
    return _scatter(n, x, indices, updates, n.attr("axis", 0), "none")


@onnx_op("ScatterND")
def scatter_nd(n, x, indices, updates):
    """x seen as (positions, rest): each index row names one position, whose row of rest
    gets the matching updates (a scatter along axis 0)."""
    reduction = n.attr("reduction", "none")
    idx = _host_indices(n, indices)
    k = idx.shape[-1] if idx.ndim else -1
    want = tuple(idx.shape[:-1]) + tuple(x.shape[k:]) if idx.ndim else None
    if not 1 <= k <= x.ndim or tuple(updates.shape) != want:
        raise n.error(f"indices {idx.shape} and updates {tuple(updates.shape)} do not fit "
                      f"data {tuple(x.shape)} (updates must be indices.shape[:-1] + "
                      f"data.shape[k:], k = indices.shape[-1] <= rank)", errors.ShapeError)
    dims = x.shape[:k]
    flat = _flat_positions(_check_coords(n, idx, dims, 0, x.shape), dims).reshape(-1, 1)
    inner = prod(x.shape[k:])
    pos = const(np.broadcast_to(flat, (flat.shape[0], inner)), like=x, dtype=np.int64)
    y = _scatter(n, F.reshape(x, prod(dims), inner), pos,
                 F.reshape(updates, flat.shape[0], inner), 0, reduction)
    return F.reshape(y, *x.shape)


@onnx_op("OneHot")
def one_hot(n, indices, depth, values):
    depth = int(n.scalar(depth))  # ONNX: a non-integer depth is cast to int64
    if depth < 1:
        raise n.error(f"depth must be positive, got {depth}", errors.ValueError)
    axis = n.attr("axis", -1)
    if not -indices.ndim - 1 <= axis <= indices.ndim:
        raise n.error(f"axis {axis} is out of range for an output of {indices.ndim + 1} "
                      f"dimensions", errors.IndexError)
    vals = n.host(values).reshape(-1)
    if vals.size != 2:
        raise n.error(f"values must hold [off_value, on_value], got {vals.size} values",
                      errors.ValueError)
    check_shape(n, list(indices.shape) + [depth])
    if not indices.dtype.is_integer:  # ONNX: cast to int64 before use
        indices = F.cast(indices, "int64")
    return F.one_hot(indices, depth, axis, vals[1].item(), vals[0].item(), dtype=values.dtype)


# ---- selection --------------------------------------------------------------------------

@onnx_op("NonZero")
def nonzero(n, x):
    return F.nonzero(x)


@onnx_op("TopK")
def top_k(n, x, k=None):
    k = n.attr("k") if n.opset < 10 else n.scalar(k)
    axis = axis_of(n, n.attr("axis", -1), x.ndim)
    if k is None or not 0 <= int(k) <= x.shape[axis]:
        raise n.error(f"k = {k} is out of range for axis {axis} of {tuple(x.shape)}",
                      errors.ValueError)
    v, i = F.topk(_wide(x), int(k), axis, bool(n.attr("largest", 1)), bool(n.attr("sorted", 1)))
    return F.cast(v, x.dtype), i


def _arg(fn):
    def handler(n, x):
        axis = axis_of(n, n.attr("axis", 0), x.ndim)
        return fn(_wide(x), axis, bool(n.attr("keepdims", 1)),
                  select_last=bool(n.attr("select_last_index", 0)))
    return handler


onnx_op("ArgMax")(_arg(F.argmax))
onnx_op("ArgMin")(_arg(F.argmin))


@onnx_op("Unique")
def unique(n, x):
    """The distinct values (or slices along axis) found on the host; Y is gathered from x so
    that it keeps x's gradient."""
    axis = n.attr("axis")
    if axis is None:
        x, axis = F.reshape(x, -1), 0
    else:
        axis = axis_of(n, axis, x.ndim)
    a = n.host(_wide(x))
    rows = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
    _, index, inverse, counts = np.unique(rows, axis=0, return_index=True,
                                          return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not n.attr("sorted", 1):  # in order of first occurrence instead
        order = np.argsort(index, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        index, counts, inverse = index[order], counts[order], rank[inverse]
    index, inverse, counts = (v.astype(np.int64) for v in (index, inverse, counts))
    y = F.gather(x, const(index, like=x), axis)
    return y, const(index, like=x), const(inverse, like=x), const(counts, like=x)


# ---- scans ------------------------------------------------------------------------------

def _scan_args(n, x, axis):
    return axis_of(n, int(n.scalar(axis)), x.ndim), bool(n.attr("exclusive", 0)), \
        bool(n.attr("reverse", 0))


@onnx_op("CumSum")
def cumsum(n, x, axis):
    axis, exclusive, reverse = _scan_args(n, x, axis)
    y = F.cumsum(_wide(x), axis, exclusive=exclusive, reverse=reverse)
    return F.cast(y, x.dtype) if y.dtype != x.dtype else y


@onnx_op("CumProd")
def cumprod(n, x, axis):
    """A log-step scan: after step s every element holds the product of the 2**s elements
    ending at it, so ceil(log2(size)) multiplications by shifted copies do it (and the
    gradient flows through them)."""
    axis, exclusive, reverse = _scan_args(n, x, axis)
    y = _wide(x)
    if reverse:
        y = F.flip(y, axis)
    d = y.shape[axis]
    if exclusive:  # shift by one, 1 coming in
        y = _shift_in_ones(y, axis, 1, d)
    shift = 1
    while shift < d:
        y = F.mul(y, _shift_in_ones(y, axis, shift, d))
        shift *= 2
    if reverse:
        y = F.flip(y, axis)
    return F.cast(y, x.dtype) if y.dtype != x.dtype else y


def _shift_in_ones(y, axis, shift, d):
    pads = [0] * (2 * y.ndim)
    pads[axis] = shift
    key = [slice(None)] * y.ndim
    key[axis] = slice(0, d)
    return F.getitem(F.pad(y, pads, value=1), tuple(key))


# ---- einsum -----------------------------------------------------------------------------

@onnx_op("Einsum")
def einsum(n, *xs):
    eq = n.attr("equation", "").replace(" ", "")
    terms, out = _parse_einsum(n, eq, xs)
    dtype = xs[0].dtype
    ops = []
    for x, labels in zip(xs, terms):
        ops.append(_diagonals(n, _wide(x), labels))
    # A label's size: equal wherever it appears, or 1 there (broadcast).
    sizes = {}
    for x, labels in ops:
        for lab, d in zip(labels, x.shape):
            s = sizes.setdefault(lab, d)
            if s == 1:
                sizes[lab] = d
            elif d not in (1, s):
                raise n.error(f"label {lab!r} has sizes {s} and {d} in {eq!r}",
                              errors.ShapeError)
    ops = [(_broadcast(x, [sizes[lab] for lab in labels]), labels) for x, labels in ops]
    x, labels = ops[0]
    x, labels = _sum_unneeded(x, labels, out, ops[1:])
    for i in range(1, len(ops)):
        y, ylabels = ops[i]
        y, ylabels = _sum_unneeded(y, ylabels, out + labels, ops[i + 1:])
        x, labels = _contract(x, labels, y, ylabels, out, ops[i + 1:])
    x, labels = _sum_unneeded(x, labels, out, [])
    x = F.permute(x, *[labels.index(lab) for lab in out]) if labels else x
    return F.cast(x, dtype) if x.dtype != dtype else x


def _parse_einsum(n, eq, xs):
    """The labels of each operand and of the output; '...' becomes labels '.0', '.1'..."""
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    if len(parts) != len(xs):
        raise n.error(f"equation {eq!r} has {len(parts)} operands, the node {len(xs)} inputs",
                      errors.ValueError)
    terms, ell = [], 0
    for part, x in zip(parts, xs):
        letters = part.replace("...", "")
        if (letters and not letters.isalpha()) or part.count("...") > 1:
            raise n.error(f"cannot read term {part!r} of equation {eq!r}", errors.ValueError)
        e = x.ndim - len(letters)
        if e < 0 or (e and "..." not in part):
            raise n.error(f"term {part!r} of {eq!r} does not fit input shape {tuple(x.shape)}",
                          errors.ShapeError)
        terms.append((part, e))
        ell = max(ell, e)
    labelled = []
    for part, e in terms:
        head, _, tail = part.partition("...")
        labelled.append(list(head) + [f".{ell - e + j}" for j in range(e)] + list(tail)
                        if "..." in part else list(part))
    dots = [f".{j}" for j in range(ell)]
    if arrow:
        head, has, tail = rhs.partition("...")
        out = list(head) + (dots if has else []) + list(tail)
        if has and ell == 0:
            out = list(head) + list(tail)
        seen = {lab for t in labelled for lab in t}
        if any(lab not in seen for lab in out) or len(set(out)) != len(out):
            raise n.error(f"output of {eq!r} names a label twice or one no input has",
                          errors.ValueError)
    else:  # implicit: the ellipsis, then the labels seen once, in ASCII order
        counts = {}
        for t in labelled:
            for lab in t:
                counts[lab] = counts.get(lab, 0) + 1
        out = dots + sorted(lab for lab, c in counts.items() if c == 1 and lab[0] != ".")
    return labelled, out


def _diagonals(n, x, labels):
    """Repeated labels in one term take the diagonal: the two axes moved last, flattened,
    and every (d+1)-th element kept."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        lab = next(lab for lab in labels if labels.count(lab) > 1)
        i = labels.index(lab)
        j = labels.index(lab, i + 1)
        if x.shape[i] != x.shape[j]:
            raise n.error(f"label {lab!r} has sizes {x.shape[i]} and {x.shape[j]} in one term",
                          errors.ShapeError)
        d = x.shape[i]
        rest = [a for a in range(x.ndim) if a not in (i, j)]
        x = F.reshape(F.permute(x, *rest, i, j), *[x.shape[a] for a in rest], d * d)
        x = F.getitem(x, (Ellipsis, slice(0, d * d, d + 1)))
        labels = [labels[a] for a in rest] + [lab]
    return x, labels


def _broadcast(x, shape):
    return F.expand(x, *shape) if list(shape) != list(x.shape) else x


def _sum_unneeded(x, labels, keep, later):
    """Sums over the labels neither kept nor used by a later operand."""
    needed = set(keep) | {lab for _, ls in later for lab in ls}
    axes = tuple(a for a, lab in enumerate(labels) if lab not in needed)
    if not axes:
        return x, labels
    return F.sum(x, axis=axes), [lab for lab in labels if lab in needed]


def _contract(a, la, b, lb, out, later):
    """Two operands multiplied and summed over the labels only they share, as one batched
    matmul: a as (batch, a-only, shared), b as (batch, shared, b-only)."""
    needed = set(out) | {lab for _, ls in later for lab in ls}
    batch = [lab for lab in la if lab in lb and lab in needed]
    summed = [lab for lab in la if lab in lb and lab not in needed]
    a_only = [lab for lab in la if lab not in lb]
    b_only = [lab for lab in lb if lab not in la]
    size = {**dict(zip(la, a.shape)), **dict(zip(lb, b.shape))}

    def total(ls):
        return prod(size[lab] for lab in ls)
    a = F.permute(a, *[la.index(lab) for lab in batch + a_only + summed])
    b = F.permute(b, *[lb.index(lab) for lab in batch + summed + b_only])
    a = F.reshape(a, total(batch), total(a_only), total(summed))
    b = F.reshape(b, total(batch), total(summed), total(b_only))
    y = F.matmul(a, b)
    return F.reshape(y, *[size[lab] for lab in batch + a_only + b_only]), \
        batch + a_only + b_only


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- indexing ----------------------------------------------------------------------------

@exports(Gather)
def export_gather(g, f, xs, ys):
    (x, i), (y,) = xs, ys
    g.op("Gather", [x.name, i.name], out=y.name, axis=norm_axis(f.axis, x.ndim, "gather"))


@exports(GatherElements)
def export_gather_elements(g, f, xs, ys):
    (x, i), (y,) = xs, ys
    g.op("GatherElements", [x.name, i.name], out=y.name,
         axis=norm_axis(f.axis, x.ndim, "gather_elements"))


@exports(ScatterElements)
def export_scatter_elements(g, f, xs, ys):
    (x, i, u), (y,) = xs, ys
    reduction = {"sum": "add", None: "none"}.get(f.reduction, f.reduction)
    need = {"none": 11, "add": 16, "mul": 16, "max": 18, "min": 18}.get(reduction)
    if need is None:
        raise g.error(f"scatter reduction {f.reduction!r} has no ONNX form")
    if g.opset < need:
        raise g.error(f"ScatterElements with reduction {reduction!r} needs opset {need} or "
                      f"later (exporting opset {g.opset})")
    g.op("ScatterElements", [x.name, i.name, u.name], out=y.name,
         axis=norm_axis(f.axis, x.ndim, "scatter_elements"),
         reduction=None if reduction == "none" else reduction)


@exports(TopK)
def export_topk(g, f, xs, ys):
    (x,) = xs
    g.node("TopK", [x.name, g.ints([f.k])], out=[v.name for v in ys],
           axis=norm_axis(f.axis, x.ndim, "topk"), largest=int(bool(f.largest)),
           sorted=int(bool(f.sorted)))
