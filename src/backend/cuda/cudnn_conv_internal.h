/* Private to cudnn_conv.c (plans, conversions, runs) and cudnn_conv_algo.c (the choice of a
 * plan's algorithm and layout): a conv node's geometry and, with cudnn.h, the plan and the
 * backend's convolution state. */
#ifndef BRISK_CUDA_CUDNN_CONV_INTERNAL_H
#define BRISK_CUDA_CUDNN_CONV_INTERNAL_H

#include "backend/cuda/cuda_internal.h"

#include "backend/cuda/conv_algo_cache.h"
#include "backend/cuda/conv_layout.h"

#include <stdint.h>

/* The most workspace a convolution algorithm may use: larger ones are passed over. */
#define CONV_WORKSPACE_LIMIT BRISK_CUDA_CONV_WORKSPACE_LIMIT

/* x [N, C, H, W], w [Co, C/groups, kh, kw], y [N, Co, Ho, Wo] of a conv node, whichever
 * pass: logical dims, stored in the graph's layout (data_nhwc: x [N, H, W, C]). */
typedef struct conv_geom {
    int x[4], w[4], y[4];
    brisk_window win;
    conv_pass pass;
    int data_nhwc;
} conv_geom;

static inline int64_t numel4(const int d[4]) { return (int64_t)d[0] * d[1] * d[2] * d[3]; }

/* x (0), w (1), y (2): a pass's operand k's logical dims */
static inline const int *role_dims(const conv_geom *cg, int k) { return k == 0 ? cg->x : k == 1 ? cg->w : cg->y; }

#if BRISK_HAVE_CUDNN_H
#include "backend/cuda/cudnn_load.h"

typedef struct conv_descs {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
} conv_descs;

typedef struct conv_plan {
    const brisk_graph *g;
    int node;
    conv_geom geom;
    int math;
    int nhwc, dt;           /* the layout and data type cuDNN runs in (conv_layout.h) */
    int req_math, req_dt;   /* what the precision asks for; math and dt differ when fp32 (TF32) was timed faster */
    conv_descs d;
    int algo;
    size_t ws_bytes;
    size_t stage_off[3];    /* x, w, y in cuDNN's form in the staging buffer; SIZE_MAX: used as they are */
    size_t stage_bytes;
} conv_plan;

struct cuda_conv {
    cudnnHandle_t handle;
    conv_plan *plans;
    int n, cap;
    void *work;               /* shared by every conv node */
    size_t work_bytes;
    void *stage;              /* the converted operands, shared by every conv node too */
    size_t stage_bytes;
    conv_algo_cache cache;
    int cache_state;          /* 0 not read yet, 1 read, -1 refused (neither used nor written) */
    int fallbacks;            /* nodes run in the other layout: the first is a warning, the rest INFO */
};

/* cudnn_conv.c */
const char *conv_dt_name(int dt);
void conv_descs_free(conv_descs *d);
/* The descriptors in layout nhwc (filter KRSC then) and data type dt. */
brisk_status conv_descs_make(const conv_geom *cg, int math, int nhwc, int dt, conv_descs *d, const char *what,
                             brisk_error *err);
/* Which operands the plan's layout and type convert, and where their copies sit. */
void conv_stage_layout(conv_plan *p);
/* Milliseconds of the plan's conversions (0 when it converts nothing). */
brisk_status conv_time_conversions(cuda_backend *cb, const conv_plan *p, double *ms, const char *what,
                                   brisk_error *err);

/* cuDNN's math type for a precision: FMA for fp32, the default (tensor cores) else. */
int conv_math_type(brisk_gemm_precision precision);

/* cudnn_conv_algo.c */
/* The cuDNN call of a pass, for messages. */
const char *conv_pass_call(conv_pass p);
/* One launch of the plan's pass with algo on operands dn (x, w, y in cuDNN's form). */
cudnnStatus_t conv_launch(cuda_backend *cb, const conv_plan *p, int algo, void *const dn[3], void *ws,
                          size_t ws_bytes);
/* The plan's algorithm and workspace: cached, timed or the heuristic's, each kept only after
 * a trial launch cuDNN accepts; BRISK_ERR_UNSUPPORTED naming each refusal when none runs. */
brisk_status conv_choose_algo(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err);
/* Sets p->nhwc: speed.conv_layout, the rule, the cache, or both layouts timed. */
brisk_status conv_choose_layout(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err);
#endif /* BRISK_HAVE_CUDNN_H */

#endif
