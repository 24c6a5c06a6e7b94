/* Inference from a trained model (part of the train module): predictions of an MLP and
 * DDPM/DDIM sampling of the diffusion denoiser, with parameters from a checkpoint or from a
 * live trainer. Rows are processed in fixed batches of BRISK_INFER_BATCH (the last one
 * zero-padded), so results do not depend on n or the thread count. */
#ifndef BRISK_SAMPLE_H
#define BRISK_SAMPLE_H

#include "brisk/train.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_INFER_BATCH 256

typedef struct brisk_sample_params {
    brisk_sampler_kind kind; /* BRISK_SAMPLER_DDPM or BRISK_SAMPLER_DDIM */
    int steps;               /* 0: the model's noise steps (DDPM needs exactly those) */
    float eta;               /* DDIM only: 0 deterministic, 1 as stochastic as DDPM */
} brisk_sample_params;

typedef struct brisk_inference brisk_inference;

/* An inference executor for the model on a CPU backend of `threads` threads (0: OpenMP's
 * default). Parameters start as the seed-0 initialisation until loaded. */
brisk_status brisk_inference_create(const brisk_model_spec *model, int threads, brisk_inference **out,
                                    brisk_error *err);
void brisk_inference_free(brisk_inference *inf);
/* Parameters from a checkpoint of the same model, or copied from a trainer's current ones. */
brisk_status brisk_inference_load(brisk_inference *inf, const char *checkpoint, brisk_error *err);
brisk_status brisk_inference_from_trainer(brisk_inference *inf, const brisk_trainer *t, brisk_error *err);
/* MLP: y[i] = model(x[i]) for n rows; x rows `x_stride` floats apart (>= inputs), y rows
 * `y_stride` apart (>= outputs). Classifiers give class probabilities (softmax). */
brisk_status brisk_inference_predict(brisk_inference *inf, int64_t n, const float *x, int64_t x_stride, float *y,
                                     int64_t y_stride, brisk_error *err);
/* Diffusion: one fine field per coarse row. The chain starts at the first visited timestep t_0
 * from z ~ N(0, I), or, given a first guess of the fine field (guess not NULL, rows
 * `guess_stride` apart), from the forward process around it: sqrt(abar_t0) guess +
 * sqrt(1 - abar_t0) z. Pure noise is the right start only when abar_t0 is near 0; the
 * example schedule (T = 50, betas up to 0.02) leaves abar = 0.60 at t = 49.
 * The noise comes from Philox keyed by `seed`: z of row i from counter {i, stream 0x5A17,
 * block}, the step noise from the RANDN op with rng_step = batch index * steps + step, so the
 * same seed, inputs and parameters give bit-identical samples. Ensemble members: other seeds. */
brisk_status brisk_inference_sample(brisk_inference *inf, const brisk_sample_params *p, int64_t n, const float *coarse,
                                    int64_t coarse_stride, const float *guess, int64_t guess_stride, float *fine,
                                    int64_t fine_stride, uint64_t seed, brisk_error *err);

/* The baseline a downscaler must beat: each fine point takes the value of its coarse block,
 * block k of `coarse` covering fine points [k F / C, (k+1) F / C) (how the example data's
 * coarse fields are made: block means). out is [n, F]. */
void brisk_upsample_blocks(const float *coarse, int64_t n, int64_t C, int64_t F, float *out);

typedef struct brisk_sample_report {
    int64_t rows;
    int members;
    double seconds;         /* sampling wall time */
    /* with a truth (else NaN): */
    double rmse_member;     /* mean over members of each member's RMSE to the truth */
    double rmse_mean;       /* RMSE of the ensemble mean */
    double spread;          /* sqrt of the mean ensemble variance (K - 1 denominator; NaN for K = 1) */
    double rmse_baseline;   /* brisk_upsample_blocks of the coarse fields */
} brisk_sample_report;

/* `brisk sample`: coarse [N, coarse] from a .npy (or an .npz's member "coarse"), `members`
 * samples each (seeds seed, seed+1, ...), written as [N, fine] (members 1) or [members, N,
 * fine]; with truth_npy ([N, fine], or an .npz's member "fine"),
 * the report's RMSEs and spread. guess: NULL (start from noise), "blocks" (the coarse block
 * values, brisk_upsample_blocks) or a .npy of [N, fine] first guesses. */
brisk_status brisk_sample_file(const char *checkpoint, const char *coarse_npy, const char *output_npy,
                               const char *truth_npy, const char *guess, const brisk_sample_params *p, int members,
                               uint64_t seed, int threads, const brisk_logger *log, brisk_sample_report *rep,
                               brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
