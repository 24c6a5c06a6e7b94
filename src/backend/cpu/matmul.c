/* MATMUL: out[b] = op(a[b]) @ op(b[b]), row-major, op = transpose when trans_a/b.
 * a [..., M, K] (or [..., K, M] with trans_a), b [K, N] (or [N, K] with trans_b), or
 * batched [..., K, N] with the same batch dims as a; out [..., M, N].
 *
 * brisk's own sgemm is the Goto/BLIS scheme: C is cut into NC-wide column blocks
 * and K into KC-deep slices; for each slice a KC x NC block of op(B) is packed into
 * NR-wide column strips (contiguous per k) and an MC x KC block of op(A) into
 * MR-tall row strips, so the micro-kernel reads both with unit stride whatever the
 * transposes were, and keeps an MR x NR tile of C in registers (8 x 32 floats =
 * 16 zmm accumulators with AVX-512; 6 x 16 = 12 ymm with AVX2). The micro-kernel is
 * written with GCC vector extensions, not intrinsics, so it compiles (slower) on
 * any target. Threads take bands of C's columns (or rows when C is narrow) from the
 * pool one at a time, the bands fixed by the shape: every element of C is computed by
 * one thread in the same order, so the result does not depend on timing.
 *
 * BLAS or own, per shape: timed once per shape by gemm_choice.c; cpu_sgemm_use_blas()
 * below is the fixed rule it falls back to. */
#include "backend/cpu/cpu_internal.h"

#include <stdlib.h>
#include <string.h>

#if BRISK_HAVE_BLAS
#include <cblas.h>
#endif

#if defined(__AVX512F__)
#define VL 16
#else
#define VL 8
#endif
#define MR CPU_SGEMM_MR
#define NR (2 * VL)
#define KC 256
#define MC (MR * 16)
#define NC 512

typedef float vf __attribute__((vector_size(VL * 4)));

#define NARROW_N 8
#define NARROW_CHUNK 512

/* A's packing, B's packing, and the narrow path's C^T chunk (in the scratch, not on the stack:
 * a host thread may have a small stack, and it runs bands too) */
size_t cpu_sgemm_scratch_floats(void) {
    return (size_t)MC * KC + (size_t)KC * NC + (size_t)NARROW_N * NARROW_CHUNK + 64;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- packing. Two of the four cases read across the stride (A not transposed,
 * B transposed: the strip wants, per k, values from MR or NR different rows). A
 * scalar element-by-element copy there costs as much as the multiply itself when
 * M is small (16 x 256 x 295: 15 of 29 us), so with AVX-512 those cases move
 * 16 x 16 blocks through registers: 16 row loads, a 4-stage butterfly of 64
 * two-source shuffles, 16 stores. */
#if VL == 16 && (defined(__GNUC__) || defined(__clang__))
#define FAST_TRANSPOSE 1
typedef int vi16 __attribute__((vector_size(64)));
#if defined(__clang__)
#define SHUF(a, b, M) __builtin_shufflevector(a, b, M(0), M(1), M(2), M(3), M(4), M(5), M(6), M(7), \
    M(8), M(9), M(10), M(11), M(12), M(13), M(14), M(15))
#else
#define SHUF(a, b, M) __builtin_shuffle(a, b, (vi16){M(0), M(1), M(2), M(3), M(4), M(5), M(6), M(7), \
    M(8), M(9), M(10), M(11), M(12), M(13), M(14), M(15)})
#endif
/* stage h swaps the off-diagonal h x h blocks of every 2h x 2h block */
#define STAGE(h)                                                              \
    for (int i = 0; i < 16; i++) {                                            \
        if (i & (h)) continue;                                                \
        vf a = r[i], b = r[i + (h)];                                          \
        r[i] = SHUF(a, b, LO##h);                                             \
        r[i + (h)] = SHUF(a, b, HI##h);                                       \
    }
#define LO8(l) (((l) & 8) ? 16 + (l) - 8 : (l))
#define HI8(l) (((l) & 8) ? 16 + (l) : (l) + 8)
#define LO4(l) (((l) & 4) ? 16 + (l) - 4 : (l))
#define HI4(l) (((l) & 4) ? 16 + (l) : (l) + 4)
#define LO2(l) (((l) & 2) ? 16 + (l) - 2 : (l))
#define HI2(l) (((l) & 2) ? 16 + (l) : (l) + 2)
#define LO1(l) (((l) & 1) ? 16 + (l) - 1 : (l))
#define HI1(l) (((l) & 1) ? 16 + (l) : (l) + 1)

/* r[i][k] -> r[k][i] */
static inline void transpose16(vf r[16]) {
    STAGE(8) STAGE(4) STAGE(2) STAGE(1)
}

/* r[i] = src[i * ld .. + 16] */
static inline void load16(vf r[16], const float *src, int64_t ld) {
    for (int i = 0; i < 16; i++) memcpy(&r[i], src + i * ld, sizeof r[i]);
}
#else
#define FAST_TRANSPOSE 0
#endif

/* Packs op(A)[m0:m0+mc, k0:k0+kc] into MR-row strips: strip s holds, for each k,
 * the MR values of rows s*MR .. s*MR+MR-1 (zero past M). */
static void pack_a(int trans_a, const float *A, int64_t lda, int64_t m0, int64_t mc, int64_t k0,
                   int64_t kc, float *dst) {
    int64_t s = 0;
#if FAST_TRANSPOSE && MR == 8
    if (!trans_a) /* two full strips (16 rows) x 16 k at a time */
        for (; s + 2 * MR <= mc; s += 2 * MR) {
            float *d0 = dst + s * kc, *d1 = d0 + MR * kc;
            const float *src = A + (m0 + s) * lda + k0;
            int64_t k = 0;
            for (; k + 16 <= kc; k += 16) {
                vf r[16];
                load16(r, src + k, lda);
                transpose16(r);
                for (int q = 0; q < 16; q++) {
                    memcpy(d0 + (k + q) * MR, &r[q], MR * sizeof(float));
                    memcpy(d1 + (k + q) * MR, (float *)&r[q] + MR, MR * sizeof(float));
                }
            }
            for (; k < kc; k++)
                for (int r = 0; r < MR; r++) {
                    d0[k * MR + r] = src[r * lda + k];
                    d1[k * MR + r] = src[(r + MR) * lda + k];
                }
        }
#endif
    for (; s < mc; s += MR) {
        int64_t rows = min64(MR, mc - s);
        float *d = dst + s * kc;
        if (!trans_a) {
            for (int64_t r = 0; r < rows; r++) {
                const float *src = A + (m0 + s + r) * lda + k0;
                for (int64_t k = 0; k < kc; k++) d[k * MR + r] = src[k];
            }
        } else if (rows == MR) { /* a whole strip: one vector per k (dW = dy^T x packs this way) */
            for (int64_t k = 0; k < kc; k++) memcpy(d + k * MR, A + (k0 + k) * lda + m0 + s, MR * sizeof(float));
        } else {
            for (int64_t k = 0; k < kc; k++) {
                const float *src = A + (k0 + k) * lda + m0 + s;
                for (int64_t r = 0; r < rows; r++) d[k * MR + r] = src[r];
            }
        }
        if (rows < MR)
            for (int64_t k = 0; k < kc; k++)
                for (int64_t r = rows; r < MR; r++) d[k * MR + r] = 0.0f;
    }
}

/* Packs op(B)[k0:k0+kc, n0:n0+nc] into NR-column strips (zero past N). */
static void pack_b(int trans_b, const float *B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0,
                   int64_t nc, float *dst) {
    for (int64_t s = 0; s < nc; s += NR) {
        int64_t cols = min64(NR, nc - s);
        float *d = dst + s * kc;
        if (!trans_b) {
            for (int64_t k = 0; k < kc; k++) {
                const float *src = B + (k0 + k) * ldb + n0 + s;
                float *dk = d + k * NR;
                if (cols == NR) {
                    for (int j = 0; j < NR; j++) dk[j] = src[j];
                } else {
                    int64_t j = 0;
                    for (; j < cols; j++) dk[j] = src[j];
                    for (; j < NR; j++) dk[j] = 0.0f;
                }
            }
        } else {
            int64_t k = 0;
#if FAST_TRANSPOSE
            if (cols == NR)
                for (; k + 16 <= kc; k += 16)
                    for (int h = 0; h < NR; h += 16) {
                        vf r[16];
                        load16(r, B + (n0 + s + h) * ldb + k0 + k, ldb);
                        transpose16(r);
                        for (int q = 0; q < 16; q++) memcpy(d + (k + q) * NR + h, &r[q], sizeof r[q]);
                    }
#endif
            for (int64_t j = 0; j < cols; j++) {
                const float *src = B + (n0 + s + j) * ldb + k0;
                for (int64_t kk = k; kk < kc; kk++) d[kk * NR + j] = src[kk];
            }
            for (int64_t j = cols; j < NR; j++)
                for (int64_t kk = 0; kk < kc; kk++) d[kk * NR + j] = 0.0f;
        }
    }
}

/* Stores (or, with add, adds) row i's accumulators, the first VL columns in v0 and the
 * next VL in v1, into C's first nr columns: whole vectors where the row has them, the
 * rest through a partial copy, never a scalar loop per element (a 60 x 60 attention
 * score block ends in a 28-column strip on every row). Each element gets exactly one
 * add, as a scalar loop would give it. */
static inline void store_part(float *ci, vf v, int n, int add) {
    if (n >= VL) {
        if (add) {
            vf o;
            memcpy(&o, ci, sizeof o);
            v += o;
        }
        memcpy(ci, &v, sizeof v);
    } else if (n > 0) {
        if (add) {
            vf o = {0};
            memcpy(&o, ci, (size_t)n * sizeof(float));
            v += o;
        }
        memcpy(ci, &v, (size_t)n * sizeof(float));
    }
}

/* The MR x NR register tile: C[0:mr, 0:nr] (+)= A_strip B_strip over kc, with the A
 * strip's element (row i, depth k) at a[i * ars + k * aks]: packed (ars 1, aks MR), or
 * read in place from op(A) (see A_IN_PLACE below). A strip at most VL wide (N = 16: the
 * attention heads' P V, dQ, dK, dV at dh 16) skips the second half of the tile, which the
 * packing left unused: the same multiply-adds on every element that is kept, so the same
 * bits, at half the work. */
static inline __attribute__((always_inline)) void kernel_body(int64_t kc, const float *restrict a, int64_t ars,
                                                              int64_t aks, const float *restrict b, int64_t bks,
                                                              float *restrict c, int64_t ldc, int mr, int nr, int add) {
    vf c0[MR], c1[MR];
    /* unrolled: as a loop GCC makes the zeroing two memset calls a tile (perf: memset 3-5 %
     * of the GRU's and the 1-D CNN's steps), though the accumulators live in registers */
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) { c0[i] = (vf){0}; c1[i] = (vf){0}; }
    if (nr <= VL) {
        for (int64_t k = 0; k < kc; k++) {
            vf b0 = *(const vf *)(b + k * bks);
            const float *ak = a + k * aks;
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) c0[i] += ak[i * ars] * b0;
        }
        for (int i = 0; i < mr; i++) store_part(c + i * ldc, c0[i], nr, add);
        return;
    }
    for (int64_t k = 0; k < kc; k++) {
        vf b0 = *(const vf *)(b + k * bks), b1 = *(const vf *)(b + k * bks + VL);
        const float *ak = a + k * aks;
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            c0[i] += ak[i * ars] * b0;
            c1[i] += ak[i * ars] * b1;
        }
    }
    for (int i = 0; i < mr; i++) {
        store_part(c + i * ldc, c0[i], VL, add);
        store_part(c + i * ldc + VL, c1[i], nr - VL, add);
    }
}

static void micro_kernel(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                         int64_t ldc, int mr, int nr, int add) {
    kernel_body(kc, a, 1, MR, b, NR, c, ldc, mr, nr, add);
}

/* A read in place: rows of A (not transposed, row stride lda) or columns (transposed) */
static void micro_kernel_rows(int64_t kc, const float *restrict a, int64_t lda, const float *restrict b,
                              float *restrict c, int64_t ldc, int nr, int add) {
    kernel_body(kc, a, lda, 1, b, NR, c, ldc, MR, nr, add);
}

static void micro_kernel_cols(int64_t kc, const float *restrict a, int64_t lda, const float *restrict b,
                              float *restrict c, int64_t ldc, int nr, int add) {
    kernel_body(kc, a, 1, lda, b, NR, c, ldc, MR, nr, add);
}

/* B read in place, row k at b + k ldb (a multiple of VL floats apart, VL-aligned), A in
 * place or packed as above */
static void micro_kernel_b_rows(int64_t kc, const float *restrict a, int64_t ars, int64_t aks,
                                const float *restrict b, int64_t ldb, float *restrict c, int64_t ldc, int mr, int nr) {
    kernel_body(kc, a, ars, aks, b, ldb, c, ldc, mr, nr, 0);
}

/* The depth of the K slices: even slices, 295 = 148 + 147 rather than 256 + 39. */
static int64_t k_step(int64_t K) {
    int64_t nk = (K + KC - 1) / KC;
    return nk ? (K + nk - 1) / nk : 0;
}

/* Columns of op(B) rounded up to whole NR strips. */
static int64_t n_strips_cols(int64_t N) { return (N + NR - 1) / NR * NR; }

/* Packing A pays when each packed strip feeds many column strips; a C at most
 * A_IN_PLACE_N wide has at most 2 of them (the width-64 Transformer's projections, and
 * attention's per-head products), and packing A there cost a third as much as the
 * multiply-adds (perf: pack_a 11 % of a step, micro_kernel 40 %). The kernel then reads
 * A in place: the same multiply-adds in the same order, so the same bits. */
#define A_IN_PLACE_N 64
#define A_IN_PLACE(m, n) ((n) <= A_IN_PLACE_N)

/* C[m0:m1, n0:n1] on one thread, with its own packing scratch. `prepacked`: op(B) as
 * cpu_sgemm_pack_b laid it out (then B and trans_b are not read), or NULL to pack here. */
static void sgemm_band_direct(int trans_a, int trans_b, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                       float *C, int64_t ldc, int accumulate, float *scratch, const float *prepacked,
                       int64_t packed_n) {
    float *pa = scratch, *pb = scratch + (size_t)MC * KC;
    int64_t kstep = k_step(K);
    int a_in_place = A_IN_PLACE(m1 - m0, n1 - n0);
    for (int64_t jc = n0; jc < n1; jc += NC) {
        int64_t nc = min64(NC, n1 - jc);
        if (K == 0) {
            if (!accumulate)
                for (int64_t i = m0; i < m1; i++) memset(C + i * ldc + jc, 0, (size_t)nc * sizeof(float));
            continue;
        }
        for (int64_t pc = 0; pc < K; pc += kstep) {
            int64_t kc = min64(kstep, K - pc);
            int add = accumulate || pc > 0;
            if (prepacked) pb = (float *)prepacked + pc * n_strips_cols(packed_n) + jc * kc;
            else pack_b(trans_b, B, ldb, pc, kc, jc, nc, pb);
            for (int64_t ic = m0; ic < m1; ic += MC) {
                int64_t mc = min64(MC, m1 - ic);
                /* in place: whole MR strips straight from A; a last partial strip is packed
                 * (the kernel reads MR rows), at the offset packing would have put it */
                int64_t full = a_in_place ? mc / MR * MR : 0;
                if (full < mc) pack_a(trans_a, A, lda, ic + full, mc - full, pc, kc, pa + full * kc);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    int nr = (int)min64(NR, nc - jr);
                    const float *bs = pb + jr * kc;
                    float *cs = C + ic * ldc + jc + jr;
                    int64_t ir = 0;
                    if (trans_a)
                        for (; ir < full; ir += MR)
                            micro_kernel_cols(kc, A + pc * lda + ic + ir, lda, bs, cs + ir * ldc, ldc, nr, add);
                    else
                        for (; ir < full; ir += MR)
                            micro_kernel_rows(kc, A + (ic + ir) * lda + pc, lda, bs, cs + ir * ldc, ldc, nr, add);
                    for (; ir < mc; ir += MR)
                        micro_kernel(kc, pa + ir * kc, bs, cs + ir * ldc, ldc, (int)min64(MR, mc - ir), nr, add);
                }
            }
        }
    }
}

/* A narrow C (N <= NARROW_N, e.g. a 3-class output layer) would fill 3 of the 32
 * columns of each register tile. Computed transposed instead, C^T = op(B)^T op(A)^T,
 * it fills 3 of 8 rows: 512 x 3 x 128 went from 22 to 8 us. C^T goes through the end of
 * the scratch, NARROW_CHUNK rows of C at a time. */

static void sgemm_band(int trans_a, int trans_b, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                       float *C, int64_t ldc, int accumulate, float *scratch) {
    int64_t nb = n1 - n0;
    if (nb > NARROW_N || m1 - m0 < 4 * MR || K == 0) {
        sgemm_band_direct(trans_a, trans_b, m0, m1, n0, n1, K, A, lda, B, ldb, C, ldc, accumulate, scratch, NULL, 0);
        return;
    }
    float *tmp = scratch + (size_t)MC * KC + (size_t)KC * NC; /* 64-byte aligned as scratch is */
    /* A' = op(B)^T [nb, K] and B' = op(A)^T [K, ch] as views of B and A */
    const float *a2 = trans_b ? B + n0 * ldb : B + n0;
    for (int64_t i0 = m0; i0 < m1; i0 += NARROW_CHUNK) {
        int64_t ch = min64(NARROW_CHUNK, m1 - i0);
        const float *b2 = trans_a ? A + i0 : A + i0 * lda;
        sgemm_band_direct(!trans_b, !trans_a, 0, nb, 0, ch, K, a2, ldb, b2, lda, tmp, ch, 0, scratch, NULL, 0);
        for (int64_t i = 0; i < ch; i++) {
            float *c = C + (i0 + i) * ldc + n0;
            for (int64_t j = 0; j < nb; j++) c[j] = accumulate ? c[j] + tmp[j * ch + i] : tmp[j * ch + i];
        }
    }
}

/* Below this many multiply-adds a GEMM is one band (too small to share); above, C is
 * cut into one band per GEMM_BAND_FMAS multiply-adds (at least 2, at most
 * GEMM_MAX_BANDS, none thinner than GEMM_BAND_MIN), with one thread as with many: the
 * bands depend on the shape only (a narrow band takes the transposed path, a wide one
 * not, and the two round differently). Each band is small enough that a thread
 * descheduled by another program holds up the product by one band of several, large
 * enough that re-packing the shared operand per band costs little. */
#define GEMM_PAR_MIN (1 << 17)
#define GEMM_BAND_FMAS (1 << 19)
#define GEMM_MAX_BANDS 64

/* Split of C into `nt` bands: bands of whole NR strips across N, or of MR
 * strips across M. Each band packs all of the operand it does not split, so split the
 * dimension whose other operand is the smaller to pack twice: N (duplicating A, M x K)
 * when N >= M, else M (duplicating B, K x N) — a 15360 x 128 x 512 product split on N
 * had both threads pack all 7.8M floats of A, 15% of its time. A dimension too short
 * to give every band a strip is not split. Band t gets [*b0, *b1) of M or N. */
static int band_split(int64_t M, int64_t N, int nt, int t, int64_t *m0, int64_t *m1, int64_t *n0,
                      int64_t *n1) {
    int64_t ns = (N + NR - 1) / NR, ms = (M + MR - 1) / MR;
    *m0 = 0; *m1 = M; *n0 = 0; *n1 = N;
    if ((ns >= nt && (N >= M || ms < nt)) || (ns < nt && ms < nt && ns >= ms)) {
        int64_t a = ns * t / nt, b = ns * (t + 1) / nt;
        *n0 = min64(a * NR, N);
        *n1 = min64(b * NR, N);
    } else {
        int64_t a = ms * t / nt, b = ms * (t + 1) / nt;
        *m0 = min64(a * MR, M);
        *m1 = min64(b * MR, M);
    }
    return *m0 < *m1 && *n0 < *n1;
}

/* How many bands a product of this shape is cut into (1: not split). A band spans at
 * least GEMM_BAND_MIN rows or columns: each band packs all of the operand it does not
 * split, so nb bands of M pack B nb times: K N nb copies against M N K multiply-adds
 * (512 x 256 x 512 in 21 bands of 24 rows would copy 2.75M floats for 67M FMAs; at
 * 128 rows a band, 4 bands copy 0.5M). */
#define GEMM_BAND_MIN 128
static int gemm_bands(int64_t M, int64_t N, int64_t K) {
    double fmas = (double)M * N * (K > 0 ? K : 1);
    if (fmas < GEMM_PAR_MIN) return 1;
    int64_t strips = (N + NR - 1) / NR > (M + MR - 1) / MR ? (N + NR - 1) / NR : (M + MR - 1) / MR;
    double want = fmas / GEMM_BAND_FMAS;
    int64_t nb = want < 2 ? 2 : want > GEMM_MAX_BANDS ? GEMM_MAX_BANDS : (int64_t)want;
    int64_t most = (M > N ? M : N) / GEMM_BAND_MIN;
    if (nb > most) nb = most < 2 ? 2 : most;
    /* an odd handful of long bands leaves a thread of 2 or 4 idle for a band's time: one
     * more band, if they stay at least half the minimum (bench_cpu_kernels 2, "tr dW qkv",
     * 384 x 128 over K 15360: 121 GFLOP/s in 3 bands, 146-156 in 4) */
    if (nb % 2 && nb < 8 && (M > N ? M : N) / (nb + 1) >= GEMM_BAND_MIN / 2) nb++;
    return (int)(nb < strips ? nb : strips);
}

/* A small C over a long K (a weight gradient summed over every row of a batch: 512 x 128
 * over K 15360) has few bands, each of which re-packs all of the operand it does not split
 * and streams it from memory: the Transformer workload's four weight-gradient shapes ran
 * at 120-160 GFLOP/s there against 165-175 for its other products. Such a product is cut
 * along K instead, into GEMM_KSPLIT chunks (by the shape only, so the bits do not depend on
 * the thread count): chunk t's product goes to its own C-sized buffer (chunk 0 to C), each
 * operand is packed once, and C = P0 + P1 + ... in chunk order after. */
#define GEMM_KSPLIT 4
static int gemm_ksplit(int64_t M, int64_t N, int64_t K) {
    int64_t big = M > N ? M : N;
    if (K < 16 * big || K < GEMM_KSPLIT * 1024 || M * N < 64 * 64 || M * N > (1 << 20) ||
        (double)M * N * K < 64.0 * GEMM_BAND_FMAS)
        return 1;
    return GEMM_KSPLIT;
}

/* chunk t of K, [*k0, *k1), whole KC slices but the last */
static void ksplit_range(int64_t K, int ks, int t, int64_t *k0, int64_t *k1) {
    int64_t per = (K + ks - 1) / ks;
    per = (per + KC - 1) / KC * KC;
    *k0 = min64(per * t, K);
    *k1 = min64(per * (t + 1), K);
}

typedef struct gemm_job {
    int ta, tb, accumulate, nbands, blas;
    int64_t M, N, K, lda, ldb, ldc;
    const float *A, *B;
    float *C, *scratch;
    size_t per;
    const cpu_epilogue *epi;
} gemm_job;

static void blas_band(int trans_a, int trans_b, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                      int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc);

static void gemm_band_range(const void *vctx, int64_t b0, int64_t b1) {
    const gemm_job *j = vctx;
    float *scratch = j->scratch ? j->scratch + j->per * (size_t)cpu_worker_id() : NULL;
    for (int64_t t = b0; t < b1; t++) {
        int64_t m0, m1, n0, n1;
        if (!band_split(j->M, j->N, j->nbands, (int)t, &m0, &m1, &n0, &n1)) continue;
        if (j->blas) blas_band(j->ta, j->tb, m0, m1, n0, n1, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc);
        else sgemm_band(j->ta, j->tb, m0, m1, n0, n1, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc, j->accumulate,
                        scratch);
        if (j->epi) cpu_epilogue_apply(j->epi, j->C, j->ldc, m0, m1, n0, n1);
    }
}

typedef struct ksplit_job {
    int ta, tb, blas, ks;
    int64_t M, N, K, lda, ldb, ldc;
    const float *A, *B;
    float *C, *parts, *scratch; /* parts: (ks - 1) M x N */
    size_t per;
} ksplit_job;

static void ksplit_range_run(const void *vctx, int64_t t0, int64_t t1) {
    const ksplit_job *j = vctx;
    float *scratch = j->scratch ? j->scratch + j->per * (size_t)cpu_worker_id() : NULL;
    for (int64_t t = t0; t < t1; t++) {
        int64_t k0, k1;
        ksplit_range(j->K, j->ks, (int)t, &k0, &k1);
        const float *a = j->ta ? j->A + k0 * j->lda : j->A + k0, *b = j->tb ? j->B + k0 : j->B + k0 * j->ldb;
        float *c = t ? j->parts + (size_t)(t - 1) * (size_t)(j->M * j->N) : j->C;
        int64_t ldc = t ? j->N : j->ldc;
        if (j->blas) blas_band(j->ta, j->tb, 0, j->M, 0, j->N, k1 - k0, a, j->lda, b, j->ldb, c, ldc);
        else sgemm_band(j->ta, j->tb, 0, j->M, 0, j->N, k1 - k0, a, j->lda, b, j->ldb, c, ldc, 0, scratch);
    }
}

/* The product split along K where gemm_ksplit says so: 1 when done, 0 when the caller is to
 * run it in bands (not such a shape, or no memory for the chunks' buffers). */
static int ksplit_gemm(cpu_pool *pool, int blas, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch,
                       size_t per) {
    int ks = gemm_ksplit(M, N, K);
    float *parts = ks > 1 ? malloc((size_t)(ks - 1) * (size_t)(M * N) * sizeof(float)) : NULL;
    if (!parts) return 0;
    ksplit_job j = {trans_a, trans_b, blas, ks, M, N, K, lda, ldb, ldc, A, B, C, parts, scratch, pool ? per : 0};
    cpu_pool_run(pool, ks, 1, ksplit_range_run, &j);
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (int t = 1; t < ks; t++) {
            const float *p = parts + (size_t)(t - 1) * (size_t)(M * N) + i * N;
#pragma omp simd
            for (int64_t x = 0; x < N; x++) c[x] += p[x];
        }
    }
    free(parts);
    return 1;
}

void cpu_sgemm(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
               const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
               int accumulate, float *scratch) {
    cpu_sgemm_epi(pool, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate, scratch, NULL);
}

void cpu_sgemm_epi(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int accumulate, float *scratch,
                   const cpu_epilogue *epi) {
    if (M <= 0 || N <= 0) return;
    size_t per = cpu_sgemm_scratch_floats();
    int nb = gemm_bands(M, N, K); /* on one thread too: a band's path (narrow or not) is part of its bits */
    float *own = NULL;
    if (!scratch) {
        size_t nt = (size_t)cpu_pool_threads(pool);
        own = aligned_alloc(64, ((per * nt * sizeof(float)) + 63) / 64 * 64);
        if (!own) return; /* only tests pass NULL */
        scratch = own;
    }
    if (!epi && !accumulate && ksplit_gemm(pool, 0, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, scratch, per)) {
        /* done, along K */
    } else if (nb == 1) {
        sgemm_band(trans_a, trans_b, 0, M, 0, N, K, A, lda, B, ldb, C, ldc, accumulate, scratch);
        if (epi) cpu_epilogue_apply(epi, C, ldc, 0, M, 0, N);
    } else {
        /* Without a pool the bands run here, in order, on the caller's one scratch: a caller inside
         * a parallel chunk (attention) passes its own thread's slice, which indexing by worker id
         * would overrun. */
        gemm_job j = {trans_a, trans_b, accumulate, nb, 0, M, N, K, lda, ldb, ldc, A, B, C, scratch, pool ? per : 0, epi};
        cpu_pool_run(pool, nb, 1, gemm_band_range, &j);
    }
    free(own);
}

int cpu_sgemm_one_band(int blas, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, int64_t kmax,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                       float *scratch) {
    if (M <= 0 || N <= 0) return 0;
    int ks = gemm_ksplit(M, N, K);
    if (ks > 1) { /* chunk 0 of K: all of C */
        int64_t k0, k1;
        ksplit_range(K, ks, 0, &k0, &k1);
        K = k1 < kmax ? k1 : kmax;
        if (blas) blas_band(trans_a, trans_b, 0, M, 0, N, K, A, lda, B, ldb, C, ldc);
        else sgemm_band(trans_a, trans_b, 0, M, 0, N, K, A, lda, B, ldb, C, ldc, 0, scratch);
        return ks;
    }
    int nb = gemm_bands(M, N, K);
    int64_t m0, m1, n0, n1;
    if (!band_split(M, N, nb, 0, &m0, &m1, &n0, &n1)) return nb;
    if (K > kmax) K = kmax;
    if (blas) blas_band(trans_a, trans_b, m0, m1, n0, n1, K, A, lda, B, ldb, C, ldc);
    else sgemm_band(trans_a, trans_b, m0, m1, n0, n1, K, A, lda, B, ldb, C, ldc, 0, scratch);
    return nb;
}

void cpu_sgemm_b_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float *C, int64_t ldc, float *scratch) {
    for (int64_t jr = 0; jr < N; jr += NR) {
        int nr = (int)min64(NR, N - jr);
        int64_t ir = 0;
        for (; ir + MR <= M; ir += MR)
            micro_kernel_b_rows(K, A + ir * lda, lda, 1, B + jr, ldb, C + ir * ldc + jr, ldc, MR, nr);
        if (ir < M) { /* the last rows, packed with zeros to a whole strip */
            if (jr == 0) pack_a(0, A, lda, ir, M - ir, 0, K, scratch);
            micro_kernel_b_rows(K, scratch, 1, MR, B + jr, ldb, C + ir * ldc + jr, ldc, (int)(M - ir), nr);
        }
    }
}

/* C[M, N] (+)= A^T B, A [K, M] and B [K, N] both row after row along k (Winograd's dw: the
 * tiles' transforms, written tile-major). The register tile is the one of every product
 * here, with A's MR values of a step k side by side in its row k: whole strips read in place,
 * the last partial one packed. B's strip stays in L1 while A's strips pass it. */
void cpu_sgemm_atb_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                        float *C, int64_t ldc, int add, float *scratch) {
    for (int64_t jr = 0; jr < N; jr += NR) {
        int nr = (int)min64(NR, N - jr);
        int64_t ir = 0;
        for (; ir + MR <= M; ir += MR)
            kernel_body(K, A + ir, 1, lda, B + jr, ldb, C + ir * ldc + jr, ldc, MR, nr, add);
        if (ir < M) {
            if (jr == 0) pack_a(1, A, lda, ir, M - ir, 0, K, scratch);
            kernel_body(K, scratch, 1, MR, B + jr, ldb, C + ir * ldc + jr, ldc, (int)(M - ir), nr, add);
        }
    }
}


size_t cpu_sgemm_packed_b_floats(int64_t K, int64_t N) { return (size_t)(K * n_strips_cols(N)) + 64; }

void cpu_sgemm_pack_b(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed) {
    int64_t kstep = k_step(K), np = n_strips_cols(N);
    for (int64_t pc = 0; pc < K; pc += kstep) {
        int64_t kc = min64(kstep, K - pc);
        /* within a slice, NC blocks sit back to back: block jc starts at jc * kc */
        for (int64_t jc = 0; jc < N; jc += NC)
            pack_b(trans_b, B, ldb, pc, kc, jc, min64(NC, N - jc), packed + pc * np + jc * kc);
    }
}

void cpu_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *packed, float *C, int64_t ldc, int accumulate, float *scratch) {
    if (M <= 0 || N <= 0) return;
    sgemm_band_direct(trans_a, 0, 0, M, 0, N, K, A, lda, NULL, 0, C, ldc, accumulate, scratch, packed, N);
}

static void blas_band(int trans_a, int trans_b, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                      int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc) {
#if BRISK_HAVE_BLAS
    const float *a = trans_a ? A + m0 : A + m0 * lda;
    const float *b = trans_b ? B + n0 * ldb : B + n0;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                (blasint)(m1 - m0), (blasint)(n1 - n0), (blasint)K, 1.0f, a, (blasint)lda, b,
                (blasint)ldb, 0.0f, C + m0 * ldc + n0, (blasint)ldc);
#else
    (void)trans_a; (void)trans_b; (void)m0; (void)m1; (void)n0; (void)n1; (void)K;
    (void)A; (void)lda; (void)B; (void)ldb; (void)C; (void)ldc;
#endif
}

int cpu_sgemm_blas(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
    return cpu_sgemm_blas_epi(pool, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, NULL);
}

int cpu_sgemm_blas_epi(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const cpu_epilogue *epi) {
#if BRISK_HAVE_BLAS
    if (M <= 0 || N <= 0) return 1;
    /* OpenBLAS is pinned to one thread at backend creation; brisk splits C itself so
     * that only brisk's pool runs (two pools on 2 cores thrash). */
    int nb = gemm_bands(M, N, K);
    if (!epi && ksplit_gemm(pool, 1, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, NULL, 0)) {
        /* done, along K */
    } else if (nb == 1) {
        blas_band(trans_a, trans_b, 0, M, 0, N, K, A, lda, B, ldb, C, ldc);
        if (epi) cpu_epilogue_apply(epi, C, ldc, 0, M, 0, N);
    } else {
        gemm_job j = {trans_a, trans_b, 0, nb, 1, M, N, K, lda, ldb, ldc, A, B, C, NULL, 0, epi};
        cpu_pool_run(pool, nb, 1, gemm_band_range, &j);
    }
    return 1;
#else
    (void)pool; (void)trans_a; (void)trans_b; (void)M; (void)N; (void)K;
    (void)A; (void)lda; (void)B; (void)ldb; (void)C; (void)ldc; (void)epi;
    return 0;
#endif
}

/* BLAS or own. Measured single-threaded on the 2-core Zen 5 box (bench/cpu_kernels.c,
 * OpenBLAS 0.3.21, which takes this CPU for a Haswell and runs its AVX2 kernels):
 *                               own AVX-512   OpenBLAS   own built for AVX2
 *   16 x 256 x 295 (x W^T)        16.6 us      29.7 us       43.7 us
 *   16 x 256 x 256 (x W^T)        11.3         24.8          37.1
 *   256 x 295 x 16 (dW)           13.9         22.5          35.6
 *   512 x 256 x 512 (x W^T)      544          1047          1166
 *   512 x 3 x 128 (x W^T)          9.8         15.2          ~24 (before the narrow path)
 *   1024^3                      8732         16491         17354
 * So: brisk's kernel wherever it is built with AVX-512 (it runs near the FMA peak,
 * ~250 GFLOP/s per core, and has no per-call overhead at small M); the BLAS when
 * brisk's kernel would be the AVX2 fallback, which is ~10-40% slower than OpenBLAS's
 * Haswell kernels on every shape above. */
int cpu_sgemm_use_blas(int64_t M, int64_t N, int64_t K) {
    (void)M; (void)N; (void)K;
#if BRISK_HAVE_BLAS && !defined(__AVX512F__)
    return 1;
#else
    return 0;
#endif
}

typedef struct batched_job {
    const cpu_backend *cb;
    int ta, tb;
    int64_t M, N, K, lda, ldb, sa, sb;
    const float *A, *B;
    float *C;
} batched_job;

static void batched_range(const void *vctx, int64_t i0, int64_t i1) {
    const batched_job *j = vctx;
    float *scratch = j->cb->gemm_scratch + cpu_sgemm_scratch_floats() * (size_t)cpu_worker_id();
    for (int64_t i = i0; i < i1; i++) {
        const float *a = j->A + i * j->sa, *b = j->B + i * j->sb;
        float *c = j->C + i * j->M * j->N;
        cpu_gemm_local(j->ta, j->tb, j->M, j->N, j->K, a, j->lda, b, j->ldb, c, j->N, scratch);
    }
}

brisk_status cpu_matmul(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id), *na = IN_NODE(g, id, 0), *nb = IN_NODE(g, id, 1);
    int ta = n->attr.trans_a, tb = n->attr.trans_b;
    if (n->shape.ndim < 2 || na->shape.ndim < 2 || nb->shape.ndim < 2)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul: operands need at least 2 dims");
    int64_t M = n->shape.d[n->shape.ndim - 2], N = n->shape.d[n->shape.ndim - 1];
    int64_t K = ta ? na->shape.d[na->shape.ndim - 2] : na->shape.d[na->shape.ndim - 1];
    int64_t kb = tb ? nb->shape.d[nb->shape.ndim - 1] : nb->shape.d[nb->shape.ndim - 2];
    if (kb != K)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul: inner dims %lld and %lld differ",
                            (long long)K, (long long)kb);
    int64_t ma = ta ? na->shape.d[na->shape.ndim - 1] : na->shape.d[na->shape.ndim - 2];
    int64_t nbn = tb ? nb->shape.d[nb->shape.ndim - 2] : nb->shape.d[nb->shape.ndim - 1];
    if (ma != M || nbn != N)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul: output [.., %lld, %lld] does not match the operands' "
                            "%lld rows and %lld columns", (long long)M, (long long)N, (long long)ma, (long long)nbn);
    if (M == 0 || N == 0 || cpu_numel(&n->shape) == 0) return BRISK_OK;
    int64_t batch = cpu_numel(&n->shape) / (M * N);
    const float *A = in[0], *B = in[1];
    float *C = out;
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    int64_t sa = na->shape.ndim > 2 ? M * K : 0, sb = nb->shape.ndim > 2 ? K * N : 0;
    /* the operands must hold exactly what the loops below read */
    if (cpu_numel(&na->shape) != (sa ? batch : 1) * M * K || cpu_numel(&nb->shape) != (sb ? batch : 1) * K * N)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul: batch dims of the operands do not match the output");
    if (batch > 1 && sb == 0 && !ta) { /* a shared 2-D b: one tall GEMM */
        M *= batch;
        batch = 1;
    }
    if (batch <= 0) return BRISK_OK;
    if (batch > 1 && cb->threads > 1 && (double)M * N * K * batch >= GEMM_PAR_MIN) {
        /* many products: each a chunk of its own, taken dynamically */
        batched_job j = {cb, ta, tb, M, N, K, lda, ldb, sa, sb, A, B, C};
        cpu_parallel_dynamic(cb, batch, 1, batched_range, &j);
        return BRISK_OK;
    }
    for (int64_t i = 0; i < batch; i++) cpu_gemm(cb, ta, tb, M, N, K, A + i * sa, lda, B + i * sb, ldb, C + i * M * N, N);
    return BRISK_OK;
}

void cpu_gemm(cpu_backend *cb, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
              int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
    cpu_gemm_epi(cb, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, NULL);
}

/* the same kernel choice as an unfused MATMUL, so fused and unfused results agree bit for bit */
void cpu_gemm_epi(cpu_backend *cb, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const cpu_epilogue *epi) {
    if (!cpu_gemm_choose_blas(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, cb->gemm_scratch) ||
        !cpu_sgemm_blas_epi(cb->pool, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, epi))
        cpu_sgemm_epi(cb->pool, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, 0, cb->gemm_scratch, epi);
}

void cpu_gemm_local(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch) {
    if (!cpu_gemm_choose_blas(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, scratch) ||
        !cpu_sgemm_blas(NULL, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc))
        cpu_sgemm(NULL, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, 0, scratch);
}
