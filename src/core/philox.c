/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
 * Counter-based: any element's random number is a pure function of (key, counter),
 * which is what lets every backend and thread produce the same dropout mask. */
#include "brisk/core.h"

#include <math.h>

void brisk_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void brisk_philox_normal4(const uint32_t ctr[4], const uint32_t key[2], float out[4]) {
    uint32_t u[4];
    brisk_philox4x32(ctr, key, u);
    for (int i = 0; i < 4; i += 2) {
        float r = sqrtf(-2.0f * logf(brisk_u32_to_unit(u[i])));
        float th = 6.2831853071795864f * brisk_u32_to_unit(u[i + 1]);
        out[i] = r * cosf(th);
        out[i + 1] = r * sinf(th);
    }
}

void brisk_philox_normals(uint64_t seed, uint64_t index, uint32_t stream, float *out, int64_t n) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int64_t b = 0; b * 4 < n; b++) {
        const uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), stream, (uint32_t)b};
        float v[4];
        brisk_philox_normal4(ctr, key, v);
        for (int64_t j = 0; j < 4 && b * 4 + j < n; j++) out[b * 4 + j] = v[j];
    }
}
