/*
 * layout.cu - the shape-changing copies on CUDA (records in api/layout.c and api/copy.c):
 * concat (each part copied into its slice of the output), pad (constant, reflect, edge),
 * tile, triangle (tril/triu) and cumsum (floats, float16 and bfloat16 too, add in double,
 * integers in wrapping int64, as on the CPU). They move elements by size, so every dtype passes.
 */
#include "convert.cuh"

hl_status hl_cuda_copy_call(const hl_call *c);

/* in = the parts (in_many when many), out[0]; i[0] = axis. */
extern "C" hl_status hl_cuda_concat(const hl_call *c) {
    hl_tensor *o = c->out[0];
    int axis = (int)c->i[0];
    int64_t at = 0;
    for (int k = 0; k < c->n_in; k++) {
        const hl_tensor *x = hl_call_in(c, k);
        int64_t len = x->shape[axis];
        if (hl_cuda_numel(x) > 0) {
            hl_tensor part = *o;  /* the part's slice of the output: a struct on the stack */
            part.shape[axis] = len;
            part.offset += at * o->strides[axis];
            hl_call cp;
            memset(&cp, 0, sizeof cp);
            cp.op = HL_OP_COPY;
            cp.n_in = cp.n_out = 1;
            cp.in[0] = x;
            cp.out[0] = &part;
            hl_status st = hl_cuda_copy_call(&cp);
            if (st) return st;
        }
        at += len;
    }
    return HL_OK;
}

struct remap_args {
    int nd, mode;  /* pad: 0 constant, 1 reflect, 2 edge; tile: 3 */
    int64_t oshape[HL_MAX_DIMS], ostrides[HL_MAX_DIMS], xshape[HL_MAX_DIMS], xstrides[HL_MAX_DIMS];
    int64_t begin[HL_MAX_DIMS], end[HL_MAX_DIMS];
};

/* out element e (row-major position) reads x at the mapped position, or takes fill. */
template <class T>
__global__ void remap_k(remap_args a, const T *x, T *o, int64_t n, T fill) {
    HL_GRID_STRIDE(e, n) {
        int64_t rest = e, off = 0, ooff = 0;
        bool filled = false;
        for (int d = a.nd - 1; d >= 0; d--) {
            int64_t q = rest / a.oshape[d], pos = rest - q * a.oshape[d];
            rest = q;
            ooff += pos * a.ostrides[d];
            int64_t i;
            if (a.mode == 3) {
                i = pos % a.xshape[d];
            } else {
                int64_t lo = a.begin[d] < 0 ? -a.begin[d] : 0;
                int64_t hi = a.xshape[d] - (a.end[d] < 0 ? -a.end[d] : 0);
                i = pos - a.begin[d];
                if (i < lo) {
                    if (a.mode == 0) filled = true;
                    i = a.mode == 2 ? lo : 2 * lo - i;
                } else if (i >= hi) {
                    if (a.mode == 0) filled = true;
                    i = a.mode == 2 ? hi - 1 : 2 * (hi - 1) - i;
                }
            }
            off += i * a.xstrides[d];
        }
        o[ooff] = filled ? fill : x[off];
    }
}

template <class T>
static hl_status run_remap(const hl_call *c, const remap_args &a, uint64_t fill_bits,
                           const char *op) {
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    T fill;
    memcpy(&fill, &fill_bits, sizeof fill);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto remap_kernel = remap_k<T>;
    HL_LAUNCH(remap_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, a,
              (const T *)hl_cuda_ptr(c->in[0]), (T *)hl_cuda_ptr(c->out[0]), n, fill);
    return hl_cuda_check_launch(op);
}

static hl_status remap(const hl_call *c, int mode, const char *op) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    remap_args a;
    memset(&a, 0, sizeof a);
    a.nd = o->ndim;
    a.mode = mode;
    for (int d = 0; d < a.nd; d++) {
        a.oshape[d] = o->shape[d];
        a.ostrides[d] = o->strides[d];
        a.xshape[d] = x->shape[d];
        a.xstrides[d] = x->strides[d];
        if (mode != 3) {
            a.begin[d] = c->i[1 + d];
            a.end[d] = c->i[1 + a.nd + d];
        }
    }
    uint64_t fill = mode == 0 ? hl_cuda_value_bits(o->dtype, c->f[0]) : 0;
    switch (hl_cuda_dtype_size(o->dtype)) {
        case 1: return run_remap<uint8_t>(c, a, fill, op);
        case 2: return run_remap<uint16_t>(c, a, fill, op);
        case 4: return run_remap<uint32_t>(c, a, fill, op);
        default: return run_remap<uint64_t>(c, a, fill, op);
    }
}

/* in[0] = x, out[0]; i[0] = mode, i[1 .. 2*ndim] = pads (begins, then ends); f[0] = value. */
extern "C" hl_status hl_cuda_pad(const hl_call *c) { return remap(c, (int)c->i[0], "pad"); }

/* in[0] = x, out[0]; i[0 .. ndim-1] = repeats. */
extern "C" hl_status hl_cuda_tile(const hl_call *c) { return remap(c, 3, "tile"); }

/* ---- triangle: out (contiguous) = x off the kept triangle of the last two axes zeroed ---- */

struct tri_args {
    int nd;
    int64_t shape[HL_MAX_DIMS], xstrides[HL_MAX_DIMS], k;
    bool upper;
};

template <class T>
__global__ void triangle_k(tri_args a, const T *x, T *o, int64_t n) {
    HL_GRID_STRIDE(e, n) {
        int64_t rest = e, off = 0, r = 0, q = 0;
        for (int d = a.nd - 1; d >= 0; d--) {
            int64_t t = rest / a.shape[d], pos = rest - t * a.shape[d];
            rest = t;
            off += pos * a.xstrides[d];
            if (d == a.nd - 1) q = pos;
            if (d == a.nd - 2) r = pos;
        }
        bool keep = a.upper ? (q - r >= a.k) : (q - r <= a.k);
        o[e] = keep ? x[off] : (T)0;
    }
}

template <class T>
static hl_status run_triangle(const hl_call *c, const tri_args &a, int64_t n, cudaStream_t s) {
    auto triangle_kernel = triangle_k<T>;
    HL_LAUNCH(triangle_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, s, a,
              (const T *)hl_cuda_ptr(c->in[0]), (T *)hl_cuda_ptr(c->out[0]), n);
    return hl_cuda_check_launch("triangle");
}

/* in[0] = x (strided), out[0] contiguous; i[0] = k, i[1] = upper. */
extern "C" hl_status hl_cuda_triangle(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    tri_args a;
    memset(&a, 0, sizeof a);
    a.nd = o->ndim;
    for (int d = 0; d < a.nd; d++) {
        a.shape[d] = o->shape[d];
        a.xstrides[d] = x->strides[d];
    }
    a.k = c->i[0];
    a.upper = c->i[1] != 0;
    int64_t n = hl_cuda_numel(o);
    if (!n) return HL_OK;
    cudaStream_t s = hl_cuda_dev(hl_cuda_call_device(c))->stream;
    switch (hl_cuda_dtype_size(o->dtype)) {
        case 1: return run_triangle<uint8_t>(c, a, n, s);
        case 2: return run_triangle<uint16_t>(c, a, n, s);
        case 4: return run_triangle<uint32_t>(c, a, n, s);
        default: return run_triangle<uint64_t>(c, a, n, s);
    }
}

/* ---- cumsum: x and out contiguous, viewed as (outer, L, inner); a thread per column ---- */

template <class T, class OT, class AT>
__global__ void cumsum_k(const T *x, OT *o, int64_t outer, int64_t L, int64_t inner, bool excl,
                         bool rev) {
    HL_GRID_STRIDE(col, outer * inner) {
        int64_t q = col / inner, j = col - q * inner, base = q * L * inner + j;
        AT acc = 0;
        for (int64_t k = 0; k < L; k++) {
            int64_t e = base + (rev ? L - 1 - k : k) * inner;
            AT v = (AT)hl_widen(x[e]);  /* read before the write: out may be x */
            if (excl) {
                o[e] = hl_narrow<OT>(acc);
                acc += v;
            } else {
                acc += v;
                o[e] = hl_narrow<OT>(acc);
            }
        }
    }
}

template <class T, class OT, class AT>
static hl_status run_cumsum(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int ax = (int)c->i[0];
    int64_t outer = 1, L = x->shape[ax], inner = 1;
    for (int d = 0; d < ax; d++) outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (outer * L * inner == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto cumsum_kernel = cumsum_k<T, OT, AT>;
    HL_LAUNCH(cumsum_kernel, hl_cuda_blocks(outer * inner), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(x), (OT *)hl_cuda_ptr(c->out[0]), outer, L, inner,
              c->i[1] != 0, c->i[2] != 0);
    return hl_cuda_check_launch("cumsum");
}

/* in[0] = x, out[0] (contiguous); i[0] = axis, i[1] = exclusive, i[2] = reverse. */
extern "C" hl_status hl_cuda_cumsum(const hl_call *c) {
    switch (c->in[0]->dtype) {
        case HL_F32: return run_cumsum<float, float, double>(c);
        case HL_F64: return run_cumsum<double, double, double>(c);
        /* half types: summed in double, each prefix rounded once (not the running half sum) */
        case HL_F16: return run_cumsum<hl_f16, hl_f16, double>(c);
        case HL_BF16: return run_cumsum<hl_bf16, hl_bf16, double>(c);
        case HL_I32: return run_cumsum<int32_t, int64_t, uint64_t>(c);
        case HL_I64: return run_cumsum<int64_t, int64_t, uint64_t>(c);
        case HL_U8: case HL_BOOL: return run_cumsum<uint8_t, int64_t, uint64_t>(c);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "cumsum: no CUDA kernel for %s", HL_DESC(c->in[0]));
}
