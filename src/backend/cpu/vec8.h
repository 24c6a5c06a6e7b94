/* Vectors of 8 floats (GCC vector extensions: AVX registers where the build has them, pairs
 * of SSE ones where not) and their transposes in registers, for kernels that turn rows into
 * columns 8 at a time (conv_winograd.c's tiles, shape.c's TRANSPOSE). */
#ifndef BRISK_CPU_VEC8_H
#define BRISK_CPU_VEC8_H

typedef float v8 __attribute__((vector_size(32)));
#if defined(__GNUC__) && !defined(__clang__) && !defined(__AVX__)
/* a portable (non-AVX) build: these helpers are all inlined, no call passes a v8 */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef int v8i __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4))); /* an unaligned load or store */
#if defined(__clang__)
#define SHUF8(a, b, M) __builtin_shufflevector(a, b, M(0), M(1), M(2), M(3), M(4), M(5), M(6), M(7))
#else
#define SHUF8(a, b, M) __builtin_shuffle(a, b, (v8i){M(0), M(1), M(2), M(3), M(4), M(5), M(6), M(7)})
#endif
/* stage h swaps the off-diagonal h x h blocks of every 2h x 2h block */
#define LO4(l) (((l) & 4) ? 8 + (l) - 4 : (l))
#define HI4(l) (((l) & 4) ? 8 + (l) : (l) + 4)
#define LO2(l) (((l) & 2) ? 8 + (l) - 2 : (l))
#define HI2(l) (((l) & 2) ? 8 + (l) : (l) + 2)
#define LO1(l) (((l) & 1) ? 8 + (l) - 1 : (l))
#define HI1(l) (((l) & 1) ? 8 + (l) : (l) + 1)
/* stage h over rows r[0..rows) */
#define STAGE_ROWS(rows, h)                                                        \
    for (int i = 0; i < (rows); i++) {                                             \
        if (i & (h)) continue;                                                     \
        v8 a = r[i], b = r[i + (h)];                                               \
        r[i] = SHUF8(a, b, LO##h);                                                 \
        r[i + (h)] = SHUF8(a, b, HI##h);                                           \
    }
/* r[i][k] -> r[k][i] */
static inline void transpose8(v8 r[8]) { STAGE_ROWS(8, 4) STAGE_ROWS(8, 2) STAGE_ROWS(8, 1) }
/* a 4 x 4 transpose within each half of r[0..3]: rows of two tiles' 4 values to the values by
 * position across the tiles, and back */
static inline void transpose4x2(v8 r[4]) { STAGE_ROWS(4, 2) STAGE_ROWS(4, 1) }

#endif
