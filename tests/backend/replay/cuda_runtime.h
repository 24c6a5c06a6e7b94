/* Host replay of CUDA kernels (tests/backend/replay): just enough of the CUDA runtime for
 * a .cu file to compile as C++ and its kernels to run on the CPU. Every CUDA thread of a
 * block is a fiber (ucontext) of one host thread, switched only at barriers: __syncthreads
 * waits for the block, a warp shuffle is an exchange through 32 slots between two waits
 * for the warp, so a shuffle that not every lane of the warp reaches hangs the replay
 * instead of passing silently. Blocks run one after another (cudaLaunchKernel is the
 * replay harness's, replay::run_block runs one). Not a model of the memory system: it
 * checks index math, tiling, masking and the order of operations, not races. */
#ifndef BRISK_REPLAY_CUDA_RUNTIME_H
#define BRISK_REPLAY_CUDA_RUNTIME_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <functional>
#include <ucontext.h>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 {
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return uint4{a, b, c, d}; }

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidConfiguration = 9, cudaErrorLaunchFailure = 719 };
typedef struct replay_stream *cudaStream_t;
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t s);

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace replay {
struct fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    bool done;
};
inline ucontext_t scheduler;
inline std::vector<fiber> fibers;
inline unsigned current;
inline std::function<void()> body;

inline void yield() { swapcontext(&fibers[current].ctx, &scheduler); }

struct barrier {
    unsigned expected, count, gen;
    void arrive_and_wait() {
        unsigned g = gen;
        if (++count == expected) {
            count = 0;
            gen++;
        } else {
            while (gen == g) yield();
        }
    }
};

struct warp {
    barrier bar;
    double slot[32];
};
inline std::vector<warp> warps;
inline barrier block_bar;

inline void fiber_main() {
    body();
    fibers[current].done = true;
}

/* one block of blockDim.x threads, each running body() until it returns */
inline void run_block() {
    unsigned n = blockDim.x;
    if (fibers.size() != n) fibers.resize(n);
    warps.assign((n + 31) / 32, warp{});
    for (unsigned w = 0; w < warps.size(); w++) warps[w].bar.expected = n - 32 * w < 32 ? n - 32 * w : 32;
    block_bar = barrier{n, 0, 0};
    for (unsigned t = 0; t < n; t++) {
        fiber &f = fibers[t];
        f.stack.resize(256 * 1024);
        f.done = false;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = &scheduler;
        makecontext(&f.ctx, fiber_main, 0);
    }
    for (unsigned left = n; left;) {
        left = 0;
        for (unsigned t = 0; t < n; t++) {
            if (fibers[t].done) continue;
            current = t;
            threadIdx = dim3(t);
            swapcontext(&scheduler, &fibers[t].ctx);
            left += !fibers[t].done;
        }
    }
}

template <typename T> inline T shfl(T v, int src) {
    warp &w = warps[threadIdx.x / 32];
    unsigned lane = threadIdx.x & 31;
    w.slot[lane] = (double)v;
    w.bar.arrive_and_wait();
    T r = (T)w.slot[src & 31];
    w.bar.arrive_and_wait();
    (void)lane;
    return r;
}
} // namespace replay

#define __shfl_sync(mask, v, src) replay::shfl((v), (int)(src))
#define __shfl_xor_sync(mask, v, o) replay::shfl((v), (int)((threadIdx.x & 31u) ^ (unsigned)(o)))
static inline void __syncthreads(void) { replay::block_bar.arrive_and_wait(); }
static inline void __threadfence(void) {}
static inline int atomicCAS(int *p, int cmp, int val) {
    int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return old;
}
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }

/* `extern __shared__ float sh[];` in a kernel names this buffer (blocks run one at a time;
 * the replay is one translation unit, so the definition lives here) */
alignas(16) float sh[228 * 1024 / 4];

#endif
