/* GEMMs through cuBLASLt. brisk is row-major and cuBLASLt column-major, so the product
 * C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLASLt's "A" is brisk's B and
 * its "B" is brisk's A, with the transposes carried over, and C^T [N, M] column-major is
 * exactly C [M, N] row-major. A bias over brisk's N is then a bias over the rows of
 * cuBLASLt's D, which is what its epilogues take; the GELU aux matrix has C's layout.
 *
 * Descriptors, layouts and the chosen algorithm are built once per shape (the key holds
 * the transposes, sizes, batch strides, operand type, compute type, epilogue, pointer
 * alignment and the deterministic flag) and reused; bias and aux pointers are set per
 * call (host-side attributes, so a captured graph records them). The algorithm is the
 * heuristic's first choice, or with autotuning the fastest of its top candidates
 * (autotune.c). Compute: fp32 (CUBLAS_COMPUTE_32F), TF32 (32F_FAST_TF32), or bf16/fp16
 * operands with fp32 accumulation and fp32 output. Deterministic mode allows no split-K
 * reduction. */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMM_CANDIDATES 8

struct cuda_gemm_plan {
    char key[256];
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int ok; /* 1: algo set; -1: cuBLASLt has none for this shape and epilogue */
};

/* The pointer's real alignment (its lowest set address bit), up to 256 bytes: cuBLASLt
 * offers its fastest kernels (wide vector loads, TMA on Hopper) only for operands it is
 * told are aligned enough, and brisk's buffers are 256-byte aligned more often than not. */
static int align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (a == 0 || (a & 255u) == 0) return 256;
    return (int)(a & (~a + 1u));
}

static int min_align(const cuda_gemm_args *a) {
    int m = align_of(a->A);
    if (align_of(a->B) < m) m = align_of(a->B);
    if (align_of(a->C) < m) m = align_of(a->C);
    if (a->aux && align_of(a->aux) < m) m = align_of(a->aux);
    return m;
}

static cublasLtEpilogue_t lt_epilogue(cuda_epilogue e) {
    switch (e) {
    case EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case EPI_RELU_BIAS: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case EPI_GELU_AUX_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case EPI_DGELU_BGRAD: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

static cublasComputeType_t compute_type(const cuda_backend *cb, int in_type) {
    return in_type == 0 && cb->opt.precision == BRISK_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

static void plan_destroy(cuda_gemm_plan *p) {
    if (p->desc) cuda_lt.cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cuda_lt.cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cuda_lt.cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cuda_lt.cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void cuda_gemm_free_plans(cuda_backend *cb) {
    for (int i = 0; i < cb->n_plans; i++) plan_destroy(&cb->plans[i]);
    free(cb->plans);
    cb->plans = NULL;
    cb->n_plans = cb->cap_plans = 0;
}

static brisk_status layout(cublasLtMatrixLayout_t *l, cudaDataType t, int64_t rows, int64_t cols, int64_t ld,
                           int64_t batch, int64_t stride, const char *what, brisk_error *err) {
    LT(cuda_lt.cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld), what);
    if (batch > 1) {
        int32_t b = (int32_t)batch;
        LT(cuda_lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b), what);
        LT(cuda_lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
           what);
    }
    return BRISK_OK;
}

static brisk_status plan_build(cuda_backend *cb, const cuda_gemm_args *a, cuda_gemm_plan *p, brisk_error *err) {
    static const cudaDataType in_types[3] = {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F};
    cudaDataType it = in_types[a->in_type];
    LT(cuda_lt.cublasLtMatmulDescCreate(&p->desc, compute_type(cb, a->in_type), CUDA_R_32F), a->what);
    cublasOperation_t op_a = a->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = a->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), a->what);
    LT(cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), a->what);
    cublasLtEpilogue_t epi = lt_epilogue(a->epi);
    LT(cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), a->what);
    if (a->epi != EPI_NONE) {
        int32_t bt = CUDA_R_32F;
        LT(cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt), a->what);
    }
    if (a->epi == EPI_GELU_AUX_BIAS || a->epi == EPI_DGELU_BGRAD) {
        int64_t ld = a->N, stride = a->M * a->N;
        LT(cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld), a->what);
        if (a->batch > 1)
            LT(cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride,
                                              sizeof stride), a->what);
    }
    brisk_status st;
    /* cuBLASLt A = brisk B: stored [K, N] (ld N) or, transposed, [N, K] (ld K) row-major */
    if ((st = layout(&p->la, it, a->tb ? a->K : a->N, a->tb ? a->N : a->K, a->tb ? a->K : a->N, a->batch, a->sb,
                     a->what, err)) ||
        (st = layout(&p->lb, it, a->ta ? a->M : a->K, a->ta ? a->K : a->M, a->ta ? a->M : a->K, a->batch, a->sa,
                     a->what, err)) ||
        (st = layout(&p->lc, CUDA_R_32F, a->N, a->M, a->N, a->batch, a->M * a->N, a->what, err)))
        return st;
    return BRISK_OK;
}

static void set_pointers(const cuda_gemm_plan *p, const cuda_gemm_args *a) {
    if (a->epi == EPI_BIAS || a->epi == EPI_RELU_BIAS || a->epi == EPI_GELU_AUX_BIAS)
        cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias, sizeof a->bias);
    if (a->epi == EPI_DGELU_BGRAD)
        cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias_grad, sizeof a->bias_grad);
    if (a->epi == EPI_GELU_AUX_BIAS || a->epi == EPI_DGELU_BGRAD)
        cuda_lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &a->aux, sizeof a->aux);
}

typedef struct run_ctx {
    cuda_backend *cb;
    cuda_gemm_plan *p;
    const cuda_gemm_args *a;
} run_ctx;

static int run_algo(void *vctx, const cublasLtMatmulAlgo_t *algo) {
    run_ctx *c = vctx;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cuda_lt.cublasLtMatmul(c->cb->lt, c->p->desc, &one, c->a->B, c->p->la, c->a->A, c->p->lb, &zero,
                                      c->a->C, c->p->lc, c->a->C, c->p->lc, algo, c->cb->workspace,
                                      CUDA_WORKSPACE_BYTES, c->cb->compute);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : (int)s;
}

static brisk_status plan_choose(cuda_backend *cb, const cuda_gemm_args *a, cuda_gemm_plan *p, brisk_error *err) {
    cublasLtMatmulPreference_t pref;
    LT(cuda_lt.cublasLtMatmulPreferenceCreate(&pref), a->what);
    size_t ws = CUDA_WORKSPACE_BYTES;
    uint32_t al = (uint32_t)min_align(a);
    brisk_status st = BRISK_OK;
    cublasStatus_t s = cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    if (s == CUBLAS_STATUS_SUCCESS && cb->opt.deterministic) {
        uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
        s = cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none);
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
        cuda_lt.cublasLtMatmulPreferenceDestroy(pref);
        return lt_fail(err, s, "cublasLtMatmulPreferenceSetAttribute", a->what);
    }
    cublasLtMatmulHeuristicResult_t res[GEMM_CANDIDATES];
    int found = 0;
    set_pointers(p, a); /* the heuristic reads the epilogue pointers' alignment */
    s = cuda_lt.cublasLtMatmulAlgoGetHeuristic(cb->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, GEMM_CANDIDATES, res, &found);
    cuda_lt.cublasLtMatmulPreferenceDestroy(pref);
    /* an epilogue cuBLASLt cannot do here (whatever the status says) is decomposed by the caller */
    if (a->epi != EPI_NONE && (s != CUBLAS_STATUS_SUCCESS || found <= 0)) {
        p->ok = -1;
        return BRISK_OK;
    }
    if ((s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) || (s == CUBLAS_STATUS_SUCCESS && found < 0))
        return lt_fail(err, s, "cublasLtMatmulAlgoGetHeuristic", a->what);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) {
        p->ok = -1;
        return BRISK_OK;
    }
    int choice = 0;
    run_ctx ctx = {cb, p, a};
    if ((st = cuda_autotune(cb, p->key, res, found, run_algo, &ctx, &choice, err))) return st;
    p->algo = res[choice].algo;
    p->ok = 1;
    return BRISK_OK;
}

static brisk_status find_plan(cuda_backend *cb, const cuda_gemm_args *a, cuda_gemm_plan **out, brisk_error *err) {
    char key[256];
    snprintf(key, sizeof key, "t%d%d m%lld n%lld k%lld b%lld sa%lld sb%lld in%d c%d e%d al%d d%d", a->ta, a->tb,
             (long long)a->M, (long long)a->N, (long long)a->K, (long long)a->batch, (long long)a->sa,
             (long long)a->sb, a->in_type, (int)compute_type(cb, a->in_type), (int)a->epi, min_align(a),
             cb->opt.deterministic);
    for (int i = 0; i < cb->n_plans; i++)
        if (strcmp(cb->plans[i].key, key) == 0) { *out = &cb->plans[i]; return BRISK_OK; }
    if (cb->n_plans == cb->cap_plans) {
        int cap = cb->cap_plans ? 2 * cb->cap_plans : 32;
        cuda_gemm_plan *grown = realloc(cb->plans, (size_t)cap * sizeof *grown);
        if (!grown) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory for GEMM plans");
        cb->plans = grown;
        cb->cap_plans = cap;
    }
    cuda_gemm_plan *p = &cb->plans[cb->n_plans];
    memset(p, 0, sizeof *p);
    snprintf(p->key, sizeof p->key, "%s", key);
    brisk_status st = plan_build(cb, a, p, err);
    if (!st) st = plan_choose(cb, a, p, err);
    if (st) {
        plan_destroy(p);
        return st;
    }
    cb->n_plans++;
    *out = p;
    return BRISK_OK;
}

brisk_status cuda_gemm(cuda_backend *cb, const cuda_gemm_args *a, brisk_error *err) {
    if (a->batch > 1 && (a->sa == 0 || a->sb == 0)) {
        /* one operand shared by every batch entry (a batch stride of 0, which cuBLASLt's
         * strided batches are not documented to take): one product per entry */
        size_t esz = a->in_type ? 2 : 4;
        cuda_gemm_args one = *a;
        one.batch = 1;
        for (int64_t i = 0; i < a->batch; i++) {
            one.A = (const char *)a->A + (size_t)(i * a->sa) * esz;
            one.B = (const char *)a->B + (size_t)(i * a->sb) * esz;
            one.C = a->C + i * a->M * a->N;
            brisk_status st = cuda_gemm(cb, &one, err);
            if (st) return st;
        }
        return BRISK_OK;
    }
    cuda_gemm_plan *p = NULL;
    brisk_status st = find_plan(cb, a, &p, err);
    if (st) return st;
    if (p->ok < 0) {
        if (a->epi != EPI_NONE) return BRISK_ERR_UNSUPPORTED; /* the caller decomposes it */
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cublasLt: no algorithm for %s ([%lld, %lld] x [%lld, %lld], "
                            "batch %lld, %s)", a->what, (long long)a->M, (long long)a->K, (long long)a->K,
                            (long long)a->N, (long long)a->batch, a->in_type == 0 ? "f32" : a->in_type == 1 ? "bf16" : "fp16");
    }
    set_pointers(p, a);
    run_ctx ctx = {cb, p, a};
    int s = run_algo(&ctx, &p->algo);
    if (s && a->epi != EPI_NONE && !cb->capturing) { /* refused before launching: decompose from now on */
        p->ok = -1;
        return BRISK_ERR_UNSUPPORTED;
    }
    if (s) return lt_fail(err, (cublasStatus_t)s, "cublasLtMatmul", a->what);
    return BRISK_OK;
}
