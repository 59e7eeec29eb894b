/*
 * packed_layouts.h - where the packed weights of inference products keep each value: the
 * packed B of gemm_pack_b (cpu/matmul_fused.c) and Winograd's transformed kernels of
 * conv_pack (cpu/winograd.c). The CPU kernels and the CUDA ones (libcore/cuda/fused.cu) both
 * read these, so a tensor packed on one device means the same on the other (moved with
 * .to(), it stays valid) and both backends pack bit for bit alike. Read as C and as C++
 * (nvcc, and g++ for the emulated backend).
 */
#ifndef HL_PACKED_LAYOUTS_H
#define HL_PACKED_LAYOUTS_H

#include <stdbool.h>
#include <stdint.h>

#include "hl_core.h"

#ifdef __CUDACC__
#define HL_HOST_DEVICE __host__ __device__
#else
#define HL_HOST_DEVICE
#endif

/* gemm_pack_b: panels of HL_PACK_B_NR columns (zeros past column N), cut into blocks of
   HL_PACK_B_KC rows; the blocks of rows [0, KC) of every panel come first, panel after
   panel, then those of rows [KC, 2 KC), and so on. */
enum { HL_PACK_B_NR = 16, HL_PACK_B_KC = 256 };

/* Where the KC rows of panel p that start at row pc begin in a packed B of K rows and P
   panels (kc x NR floats each, kc = min(KC, K - pc)). */
HL_HOST_DEVICE static inline int64_t hl_packed_b_at(int64_t K, int64_t P, int64_t p,
                                                    int64_t pc) {
    const int64_t kc = K - pc < HL_PACK_B_KC ? K - pc : HL_PACK_B_KC;
    return pc * P * HL_PACK_B_NR + p * kc * HL_PACK_B_NR;
}

/* conv_pack's Winograd layout: U = G g G^T, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], for
   the 3x3 kernel g (row stride gs, column stride gc, so a rotated kernel is read with
   negative strides); entry e of the 4x4 U goes to u[e * us]. */
HL_HOST_DEVICE static inline void hl_winograd_weight_tile(const float *g, int64_t gs,
                                                         int64_t gc, float *u, int64_t us) {
    float t[4][3];
    for (int c = 0; c < 3; c++) {
        const float g0 = g[c * gc], g1 = g[gs + c * gc], g2 = g[2 * gs + c * gc];
        t[0][c] = g0;
        t[1][c] = 0.5f * (g0 + g1 + g2);
        t[2][c] = 0.5f * (g0 - g1 + g2);
        t[3][c] = g2;
    }
    for (int i = 0; i < 4; i++) {
        const float q0 = t[i][0], q1 = t[i][1], q2 = t[i][2];
        u[(i * 4 + 0) * us] = q0;
        u[(i * 4 + 1) * us] = 0.5f * (q0 + q1 + q2);
        u[(i * 4 + 2) * us] = 0.5f * (q0 - q1 + q2);
        u[(i * 4 + 3) * us] = q2;
    }
}

/* conv_pack's F(4x4, 3x3) layout (HL_CONV_PACK_WINOGRAD43): U = G g G^T with the 6 x 3
       G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
   the interpolation points 0, 1, -1, 2, -2 and infinity (cpu/winograd43.c derives it); entry
   e of the 6x6 U goes to u[e * us]. Each value is a sum whose multiplications by powers of
   two are exact, then one correctly rounded division: no step a compiler may contract into
   a fused multiply-add changes, so the CPU, nvcc and the emulated backend write the same
   bits. */
HL_HOST_DEVICE static inline void hl_winograd43_g_column(float g0, float g1, float g2,
                                                        float t[6]) {
    t[0] = g0 / 4.0f;
    t[1] = -(g0 + g1 + g2) / 6.0f;
    t[2] = -(g0 - g1 + g2) / 6.0f;
    t[3] = (g0 + 2.0f * g1 + 4.0f * g2) / 24.0f;
    t[4] = (g0 - 2.0f * g1 + 4.0f * g2) / 24.0f;
    t[5] = g2;
}

HL_HOST_DEVICE static inline void hl_winograd43_weight_tile(const float *g, float *u,
                                                           int64_t us) {
    float t[3][6];   /* t[c] = G (column c of g) */
    for (int c = 0; c < 3; c++) hl_winograd43_g_column(g[c], g[3 + c], g[6 + c], t[c]);
    for (int i = 0; i < 6; i++) {
        float row[6];   /* row i of (G g) G^T */
        hl_winograd43_g_column(t[0][i], t[1][i], t[2][i], row);
        for (int k = 0; k < 6; k++) u[(i * 6 + k) * us] = row[k];
    }
}

/* Where conv_pack's Winograd layouts keep U[e][co][ci] (e < 16 or 36, of a C_out x C_in layer):
   entry e's C_out x C_in matrix from e * C_out * C_in, cut into panels of HL_WINOGRAD_MR
   output channels (the last one has C_out mod MR, when that is not 0: no padding), each panel
   stored input channel by input channel, its rows' values together. That is the order in
   which cpu/winograd_product.c's kernel reads one panel: MR broadcasts per input channel.
   HL_WINOGRAD_MR is hl_core.h's (the binding reads it there). */
HL_HOST_DEVICE static inline int64_t hl_winograd_packed_at(int64_t co, int64_t ci,
                                                           int64_t c_out, int64_t c_in) {
    const int64_t p0 = co / HL_WINOGRAD_MR * HL_WINOGRAD_MR;
    const int64_t rows = c_out - p0 < HL_WINOGRAD_MR ? c_out - p0 : HL_WINOGRAD_MR;
    return p0 * c_in + ci * rows + (co - p0);
}

/* Whether kernels may take the Winograd path (cpu/winograd.c, "Precision"): their weights
   all finite and the largest magnitude, most, within HL_WINOGRAD_OUTLIER_RATIO times the root
   mean square (sum_sq over n weights). Each backend gathers the three figures its own way.
   conv_pack writes the Winograd layout of kernels that fail as NaN everywhere (for kernels
   that pass, U[0][0] is their first weight, finite), and the CPU's forward pass reads that
   first value to send such a layer to im2col without reading the weights on every call. */
#define HL_WINOGRAD_OUTLIER_RATIO 24.0
/* F(4x4, 3x3)'s transforms amplify rounding more (coefficients up to 8 in A^T, 5 in B^T, and
   1/24 in G; cpu/winograd43.c, "Precision"): a lone weight of 4 to 12 RMS that meets only
   zeros left errors of 5e-6 to 7e-6 of the output's scale (F(2x2, 3x3): 3e-7), no more than
   well-scaled weights leave, so the bound is 12 RMS, half F(2x2, 3x3)'s; trained layers'
   largest weights sit at 4 to 12 RMS. A layer it refuses keeps F(2x2, 3x3) (hl.onnx). */
#define HL_WINOGRAD43_OUTLIER_RATIO 12.0

static inline bool hl_winograd_admits_within(bool finite, double most, double sum_sq,
                                             int64_t n, double ratio) {
    return n <= 0 || (finite && most * most <= ratio * ratio * (sum_sq / (double)n));
}

static inline bool hl_winograd_admits(bool finite, double most, double sum_sq, int64_t n) {
    return hl_winograd_admits_within(finite, most, sum_sq, n, HL_WINOGRAD_OUTLIER_RATIO);
}

/* F(4x4, 3x3)'s: also no weight within a factor 64 of FLT_MAX, where G g G^T's sums (up to
   7 x 7 times a weight before the division) would overflow to infinity. */
#define HL_WINOGRAD43_MOST 5.0e36

static inline bool hl_winograd43_admits(bool finite, double most, double sum_sq, int64_t n) {
    return most <= HL_WINOGRAD43_MOST &&
           hl_winograd_admits_within(finite, most, sum_sq, n, HL_WINOGRAD43_OUTLIER_RATIO);
}

#endif /* HL_PACKED_LAYOUTS_H */
