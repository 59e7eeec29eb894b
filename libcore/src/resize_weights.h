/*
 * resize_weights.h - the interpolation weights of resize and resize_grad (ONNX Resize), per
 * axis as a small sparse matrix: row j (an output position) holds the input positions it
 * reads and their weights. The CPU kernels (cpu/resize.c) and the CUDA ones (libcore/cuda/
 * resize.cu) build them here on the host, so both devices interpolate with the same numbers.
 * Read as C and as C++.
 */
#ifndef HL_RESIZE_WEIGHTS_H
#define HL_RESIZE_WEIGHTS_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

enum { HALF_PIXEL = 0, ASYMMETRIC = 1, ALIGN_CORNERS = 2, PYTORCH_HALF_PIXEL = 3 };

/* Input coordinate of output position o, along an axis resized from n_in to n_out. */
static inline double src_coord(int coord, int64_t o, int64_t n_in, int64_t n_out, const double *scale) {
    double od = (double)o;
    switch (coord) {
        case ALIGN_CORNERS:
            return n_out > 1 ? od * (double)(n_in - 1) / (double)(n_out - 1) : 0.0;
        case ASYMMETRIC:
            return scale ? od / *scale : od * (double)n_in / (double)n_out;
        case PYTORCH_HALF_PIXEL:
            if (n_out <= 1) return 0.0;
            /* fall through */
        default: {
            if (scale) return (od + 0.5) / *scale - 0.5;
            double in = (double)n_in, out = (double)n_out;
            return ((2.0 * od + 1.0) * in - out) / (2.0 * out);
        }
    }
}

static inline int64_t clamp_index(double v, int64_t n) {
    if (!(v > 0)) return 0;  /* also NaN */
    if (v >= (double)(n - 1)) return n - 1;
    return (int64_t)v;
}

static inline int64_t nearest_index(int rule, double x, int64_t n_in) {
    double r;
    switch (rule) {
        case 0: r = ceil(x - 0.5); break;   /* round, halves down */
        case 1: r = floor(x + 0.5); break;  /* round, halves up */
        case 2: r = floor(x); break;
        default: r = ceil(x); break;
    }
    return clamp_index(r, n_in);
}

/* A sparse matrix in compressed rows: row j has entries ptr[j] .. ptr[j+1]-1. */
typedef struct {
    int64_t *ptr, *idx;
    double *w;
} csr;

static inline void csr_free(csr *m) {
    free(m->ptr);
    free(m->idx);
    free(m->w);
}

static inline bool csr_alloc(csr *m, int64_t rows, int64_t nnz) {
    m->ptr = (int64_t *)malloc(sizeof(int64_t) * (size_t)(rows + 1));
    m->idx = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nnz > 0 ? nnz : 1));
    m->w = (double *)malloc(sizeof(double) * (size_t)(nnz > 0 ? nnz : 1));
    return m->ptr && m->idx && m->w;
}

/* The forward matrix of one axis: n_out rows over n_in columns. */
static inline bool axis_matrix(csr *m, const hl_call *c, int d, int64_t n_in, int64_t n_out) {
    int mode = (int)c->i[0], coord = (int)c->i[1], rule = (int)c->i[2];
    const double *scale = c->i[3] ? &c->f[d] : NULL;
    if (!csr_alloc(m, n_out, 2 * n_out)) return false;
    int64_t nnz = 0;
    for (int64_t j = 0; j < n_out; j++) {
        m->ptr[j] = nnz;
        double x = src_coord(coord, j, n_in, n_out, scale);
        if (mode == 0) {
            m->idx[nnz] = nearest_index(rule, x, n_in);
            m->w[nnz++] = 1.0;
            continue;
        }
        /* linear: coordinates outside [0, n_in - 1] take the edge value */
        x = x > 0 ? x : 0.0;
        x = x < (double)(n_in - 1) ? x : (double)(n_in - 1);
        int64_t i0 = clamp_index(floor(x), n_in), i1 = i0 + 1 < n_in ? i0 + 1 : i0;
        double w1 = x - (double)i0;
        if (w1 == 0 || i1 == i0) {
            m->idx[nnz] = i0;
            m->w[nnz++] = 1.0;
        } else {
            m->idx[nnz] = i0;
            m->w[nnz++] = 1.0 - w1;
            m->idx[nnz] = i1;
            m->w[nnz++] = w1;
        }
    }
    m->ptr[n_out] = nnz;
    return true;
}

/* t = m^T, with n_cols rows; entries of each row stay in increasing order of m's rows. */
static inline bool transpose(csr *t, const csr *m, int64_t n_rows, int64_t n_cols) {
    int64_t nnz = m->ptr[n_rows];
    if (!csr_alloc(t, n_cols, nnz)) return false;
    memset(t->ptr, 0, sizeof(int64_t) * (size_t)(n_cols + 1));
    for (int64_t k = 0; k < nnz; k++) t->ptr[m->idx[k] + 1]++;
    for (int64_t i = 0; i < n_cols; i++) t->ptr[i + 1] += t->ptr[i];
    int64_t *fill = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n_cols > 0 ? n_cols : 1));
    if (!fill) return false;
    memcpy(fill, t->ptr, sizeof(int64_t) * (size_t)n_cols);
    for (int64_t j = 0; j < n_rows; j++)
        for (int64_t k = m->ptr[j]; k < m->ptr[j + 1]; k++) {
            int64_t at = fill[m->idx[k]]++;
            t->idx[at] = j;
            t->w[at] = m->w[k];
        }
    free(fill);
    return true;
}

#endif /* HL_RESIZE_WEIGHTS_H */
