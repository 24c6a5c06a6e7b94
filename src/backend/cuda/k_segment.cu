/* The segment sums of graph networks (SEGMENT_SUM, src/backend/cpu/gather.c):
 *   cuk_segment_sum_sorted  indices sorted by segment: one thread per output element
 *                           (segment, column) adds its segment's rows in index order from
 *                           0.0f, the CPU's loop exactly, so the result is bit-identical to
 *                           the CPU and across runs; no atomics. A block's threads share one
 *                           segment, so the binary search for its first row reads the same
 *                           addresses in every thread (broadcast loads);
 *   cuk_segment_sum_atomic  any order: zero, then one atomicAdd per input element. Faster
 *                           where many rows share few segments, but the order of the adds (and
 *                           so the last bits) changes from run to run: used only when the
 *                           backend is not deterministic, for SEGMENT_SUM and SCATTER_ADD.
 * Bad indices are reported through the error record (a position outside [0, v), or under
 * the sorted kernel a decrease); the sorted kernel never reads a row it does not own, so a
 * bad index only leaves its row out of the sums. */
#include "backend/cuda/k_common.cuh"

__device__ __forceinline__ int64_t first_at_least(const int32_t *idx, int64_t n, int64_t v) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)idx[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

__global__ void k_segment_check(const int32_t *idx, int64_t nidx, int64_t v, int sorted, cuda_errors *e, int node) {
    GRID_STRIDE(i, nidx) {
        int64_t k = idx[i];
        if (k < 0 || k >= v) dev_report(e, CUK_ERR_INDEX, node, i, k, v);
        else if (sorted && i > 0 && idx[i - 1] > k && idx[i - 1] < v) dev_report(e, CUK_ERR_UNSORTED, node, i, k, idx[i - 1]);
    }
}

__global__ void k_segment_sum_sorted(const float *x, const int32_t *idx, float *out, int64_t nidx, int64_t v,
                                     int64_t d) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t r = blockIdx.y; r < v; r += gridDim.y) {
        int64_t i = first_at_least(idx, nidx, r);
        if (j >= d) continue;
        float acc = 0.0f;
        for (; i < nidx && idx[i] == r; i++) acc += x[i * d + j];
        out[r * d + j] = acc;
    }
}

__global__ void k_segment_sum_atomic(const float *x, const int32_t *idx, float *out, int64_t nidx, int64_t v,
                                     int64_t d) {
    GRID_STRIDE(i, nidx * d) {
        int64_t k = idx[i / d];
        if (k >= 0 && k < v) atomicAdd(&out[k * d + i % d], x[i]);
    }
}

extern "C" {

cudaError_t cuk_segment_sum(const float *x, const int32_t *idx, float *out, int64_t nidx, int64_t v, int64_t d,
                            int sorted, cuda_errors *e, int node, cudaStream_t s) {
    if (d <= 0 || v <= 0) return cudaSuccess;
    if (nidx > 0) k_segment_check<<<cuk_blocks(nidx, 4), CUK_THREADS, 0, s>>>(idx, nidx, v, sorted, e, node);
    if (sorted) {
        unsigned threads = d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256;
        int64_t tiles = (d + threads - 1) / threads, rows = v < 65535 ? v : 65535;
        k_segment_sum_sorted<<<dim3((unsigned)tiles, (unsigned)rows), threads, 0, s>>>(x, idx, out, nidx, v, d);
        return cudaGetLastError();
    }
    cudaError_t c = cudaMemsetAsync(out, 0, (size_t)(v * d) * sizeof(float), s);
    if (c != cudaSuccess || nidx == 0) return c;
    k_segment_sum_atomic<<<cuk_blocks(nidx * d, 4), CUK_THREADS, 0, s>>>(x, idx, out, nidx, v, d);
    return cudaGetLastError();
}

} /* extern "C" */
