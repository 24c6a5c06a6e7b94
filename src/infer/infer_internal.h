/* The inference executor's state, shared by infer.c (parameters, predictions) and
 * sample.c (diffusion sampling). */
#ifndef BRISK_INFER_INTERNAL_H
#define BRISK_INFER_INTERNAL_H

#include "brisk/sample.h"

/* One planned graph with its executor. */
typedef struct infer_graph {
    brisk_graph *g;
    brisk_plan plan;
    brisk_exec *ex;
    brisk_model_io io;
    int params_version; /* the host parameters it holds */
} infer_graph;

struct brisk_inference {
    brisk_model_spec model;
    brisk_backend *be;
    infer_graph pred;           /* the PREDICT graph: parameter layout, checkpoint loads, MLP predictions */
    float *params;              /* host parameters in pred's layout */
    int params_version;         /* bumped at each load; graphs upload when behind */
    infer_graph step;           /* one diffusion sampling step for `sched`, built on first use */
    brisk_sample_schedule sched;
    float *rows_in, *rows_out;  /* BRISK_INFER_BATCH rows of staging */
    int64_t rows_i, rows_o;     /* a row's floats in and out (brisk_model_row_widths; diffusion: coarse + fine, fine) */
    int32_t *t_rows;
    /* the trainer's standardisation (data.normalize, or a checkpoint's that a session loaded):
     * predict applies it to the input rows (per channel, norm_n) and undoes the target's on
     * the outputs (tnorm_n); 0: none */
    float *norm_mean, *norm_std, *tnorm_mean, *tnorm_std;
    int norm_n, tnorm_n;
};

brisk_status brisk_infer_graph_plan(brisk_inference *inf, infer_graph *ig, brisk_error *err);
void brisk_infer_graph_free(infer_graph *ig);
/* Uploads the host parameters into ig when they changed since its last upload. */
brisk_status brisk_infer_graph_sync(brisk_inference *inf, infer_graph *ig, brisk_error *err);

/* A normalisation: per channel mean and deviation (n 0: none). */
typedef struct brisk_norm_stats {
    const float *mean, *std;
    int n;
} brisk_norm_stats;
/* The parameters of graph src (host arena `host`) copied into inf by name, with the input and
 * target normalisations its predictions apply (a trainer's: train/inference_params.c). */
brisk_status brisk_inference_set_params(brisk_inference *inf, const brisk_graph *src, const float *host,
                                        const brisk_norm_stats *norm, const brisk_norm_stats *tnorm, brisk_error *err);
/* sample.c: the root-mean-square difference of a and b (n values). */
double brisk_sample_rmse(const float *a, const float *b, int64_t n);

#endif
