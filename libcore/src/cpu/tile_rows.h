/* tile_rows.h - the row-count dispatch of the AVX2 6 x 16 micro-kernels (matmul_fused.c,
   attention.c): a tile of 5-6 rows runs the 6-row loop, one of 3-4 rows a 4-row loop and
   one of 1-2 rows a 2-row loop, so that a row block's last tile (64 rows = 10 x 6 + 4,
   128 = 21 x 6 + 2) does not compute rows of zeros (3% of a 64- or 128-row product).
   K_LOOP(body) is the kernel's loop over k around the rows' body, ROW(r) row r's FMAs. */
#ifndef HL_CPU_TILE_ROWS_H
#define HL_CPU_TILE_ROWS_H

#define HL_TILE_BY_ROWS(R, K_LOOP, ROW)                                                       \
    if ((R) > 4) {                                                                             \
        K_LOOP(ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5))                                      \
    } else if ((R) > 2) {                                                                      \
        K_LOOP(ROW(0) ROW(1) ROW(2) ROW(3))                                                    \
    } else {                                                                                   \
        K_LOOP(ROW(0) ROW(1))                                                                  \
    }

#endif
