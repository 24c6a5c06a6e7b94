/* Diffusion sampling: the step graph of nn/ddpm.c replayed once per sampling step over
 * batches of BRISK_INFER_BATCH rows, and `brisk sample` (coarse fields in, an ensemble of
 * fine fields out, scored against a truth when one is given). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer_internal.h"
#include "run/checkpoint_file.h"

#define STREAM_X_T 0x5A17u /* Philox stream of the starting noise */

/* The step graph for p, rebuilt only when the schedule changes. */
static brisk_status ensure_step(brisk_inference *inf, const brisk_sample_params *p, brisk_error *err) {
    brisk_sample_schedule s;
    brisk_status st = brisk_sample_schedule_make(&inf->model, p->kind, p->steps, p->eta, &s, err);
    if (st) return st;
    const brisk_sample_schedule *o = &inf->sched;
    if (inf->step.ex && o->kind == s.kind && o->steps == s.steps && o->eta == s.eta) {
        brisk_sample_schedule_free(&s);
        return BRISK_OK;
    }
    brisk_infer_graph_free(&inf->step);
    brisk_sample_schedule_free(&inf->sched);
    inf->sched = s;
    if (!(inf->step.g = brisk_graph_new())) return brisk_errorf(err, BRISK_ERR_NOMEM, "sampling: out of memory");
    st = brisk_diffusion_build_sample_step(&inf->model, &inf->sched, BRISK_INFER_BATCH, inf->step.g, &inf->step.io, err);
    if (!st) st = brisk_infer_graph_plan(inf, &inf->step, err);
    if (st) brisk_infer_graph_free(&inf->step);
    return st;
}

brisk_status brisk_inference_sample(brisk_inference *inf, const brisk_sample_params *p, int64_t n, const float *coarse,
                                    int64_t coarse_stride, const float *guess, int64_t guess_stride, float *fine,
                                    int64_t fine_stride, uint64_t seed, brisk_error *err) {
    const brisk_model_spec *m = &inf->model;
    if (m->type != BRISK_MODEL_DIFFUSION)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "sample: only a diffusion model samples; use predict for an mlp");
    brisk_status st = ensure_step(inf, p, err);
    if (!st) st = brisk_infer_graph_sync(inf, &inf->step, err);
    if (st) return st;
    const int64_t B = BRISK_INFER_BATCH, C = m->coarse, F = m->fine;
    const int S = inf->sched.steps;
    brisk_exec *ex = inf->step.ex;
    const int *in = inf->step.io.input_node; /* coarse, x_t, t */
    ex->step.seed = seed;
    ex->step.training = 0;
    for (int64_t r = 0, batch = 0; r < n && !st; r += B, batch++) {
        int64_t rows = n - r < B ? n - r : B;
        memset(inf->rows_in, 0, sizeof(float) * (size_t)(B * C));
        memset(inf->rows_out, 0, sizeof(float) * (size_t)(B * F));
        for (int64_t i = 0; i < rows; i++) {
            memcpy(inf->rows_in + i * C, coarse + (r + i) * coarse_stride, sizeof(float) * (size_t)C);
            /* the start of row r + i: the same normals whatever batch the row falls in */
            brisk_philox_normals(seed, (uint64_t)(r + i), STREAM_X_T, inf->rows_out + i * F, F);
            if (guess) { /* the forward process around the first guess: q(x_t0 | x0 = guess) */
                const float *g = guess + (r + i) * guess_stride;
                float *x = inf->rows_out + i * F;
                for (int64_t j = 0; j < F; j++) x[j] = inf->sched.start_signal * g[j] + inf->sched.start_noise * x[j];
            }
        }
        if ((st = brisk_exec_set_input(ex, in[0], inf->rows_in, err))) break;
        for (int k = 0; k < S && !st; k++) {
            for (int64_t i = 0; i < B; i++) inf->t_rows[i] = inf->sched.t[k];
            ex->step.rng_step = (uint32_t)(batch * S + k);
            if (!(st = brisk_exec_set_input(ex, in[1], inf->rows_out, err)) &&
                !(st = brisk_exec_set_input(ex, in[2], inf->t_rows, err)) &&
                !(st = brisk_exec_run(ex, BRISK_RUN_PREDICT, err)))
                st = brisk_exec_read(ex, inf->step.io.output, inf->rows_out, err);
        }
        for (int64_t i = 0; i < rows && !st; i++)
            memcpy(fine + (r + i) * fine_stride, inf->rows_out + i * F, sizeof(float) * (size_t)F);
    }
    return st;
}

void brisk_upsample_blocks(const float *coarse, int64_t n, int64_t C, int64_t F, float *out) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t k = 0; k < C; k++)
            for (int64_t i = k * F / C; i < (k + 1) * F / C; i++) out[r * F + i] = coarse[r * C + k];
}

double brisk_sample_rmse(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)(n ? n : 1));
}

/* RMSEs and spread of `members` fields of nf values each, laid out member-major. */
static brisk_status score(const float *ens, int members, const float *truth, const float *coarse, int64_t N,
                          const brisk_model_spec *m, brisk_sample_report *rep, brisk_error *err) {
    const int64_t nf = N * m->fine;
    float *mean = calloc((size_t)nf + 1, sizeof(float));
    if (!mean) return brisk_errorf(err, BRISK_ERR_NOMEM, "sample: out of memory");
    double var = 0;
    rep->rmse_member = 0;
    for (int k = 0; k < members; k++) rep->rmse_member += brisk_sample_rmse(ens + k * nf, truth, nf) / members;
    for (int64_t i = 0; i < nf; i++) {
        double s = 0, s2 = 0;
        for (int k = 0; k < members; k++) s += ens[k * nf + i];
        s /= members;
        for (int k = 0; k < members; k++) s2 += (ens[k * nf + i] - s) * (ens[k * nf + i] - s);
        mean[i] = (float)s;
        var += members > 1 ? s2 / (members - 1) : 0.0;
    }
    rep->rmse_mean = brisk_sample_rmse(mean, truth, nf);
    rep->spread = members > 1 ? sqrt(var / (double)(nf ? nf : 1)) : NAN;
    brisk_upsample_blocks(coarse, N, m->coarse, m->fine, mean);
    rep->rmse_baseline = brisk_sample_rmse(mean, truth, nf);
    free(mean);
    return BRISK_OK;
}

/* A 2-D f32 array of `cols` columns from a .npy, or (member not NULL) from that member of an
 * .npz such as `brisk synth diffusion` writes, finite everywhere. */
static brisk_status load_rows(const char *path, const char *member, int64_t cols, const char *what, brisk_tensor *t,
                              brisk_error *err) {
    size_t n = strlen(path);
    brisk_status st;
    if (member && n > 4 && strcmp(path + n - 4, ".npz") == 0) {
        brisk_npy_array a = {0};
        char name[BRISK_PATH_MAX + 80];
        snprintf(name, sizeof name, "%s:%s", path, member);
        st = brisk_npz_read_one(path, member, &a, err);
        if (!st) st = brisk_npy_to_tensor(&a, BRISK_F32, name, t, err);
        brisk_npy_free(&a);
    } else {
        st = brisk_npy_load(path, BRISK_F32, t, err);
    }
    if (st) return st;
    char s[64];
    if (t->shape.ndim != 2 || t->shape.d[1] != cols)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: expected an array of shape [N, %lld] (%s), got %s", path,
                            (long long)cols, what, brisk_shape_str(&t->shape, s, sizeof s));
    const float *v = t->data;
    for (int64_t i = 0; i < brisk_shape_numel(&t->shape); i++)
        if (!isfinite(v[i]))
            return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: row %lld, column %lld: %s is not a finite number", path,
                                (long long)(i / cols), (long long)(i % cols), isnan(v[i]) ? "NaN" : "inf");
    return BRISK_OK;
}

brisk_status brisk_sample_file(const char *checkpoint, const char *coarse_npy, const char *output_npy,
                               const char *truth_npy, const char *guess_from, const brisk_sample_params *p, int members,
                               uint64_t seed, int threads, const brisk_logger *log, brisk_sample_report *rep,
                               brisk_error *err) {
    brisk_sample_report r = {.rmse_member = NAN, .rmse_mean = NAN, .spread = NAN, .rmse_baseline = NAN};
    brisk_config cfg;
    brisk_tensor coarse = {0}, truth = {0}, out = {0}, guess = {0};
    brisk_inference *inf = NULL;
    if (members < 1) return brisk_errorf(err, BRISK_ERR_INVALID, "sample: %d members; expected at least 1", members);
    brisk_status st = brisk_checkpoint_config(checkpoint, &cfg, err);
    if (st) return st;
    const brisk_model_spec *m = &cfg.model;
    if (m->type != BRISK_MODEL_DIFFUSION) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: an mlp checkpoint; sampling needs a diffusion model "
                          "(brisk predict runs an mlp)", checkpoint);
        goto out;
    }
    if ((st = load_rows(coarse_npy, "coarse", m->coarse, "coarse fields", &coarse, err))) goto out;
    const int64_t N = coarse.shape.d[0], F = m->fine;
    if (truth_npy && !(st = load_rows(truth_npy, "fine", F, "fine fields", &truth, err)) && truth.shape.d[0] != N)
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %lld rows, but %s has %lld", truth_npy, (long long)truth.shape.d[0],
                          coarse_npy, (long long)N);
    if (st) goto out;
    if (guess_from && strcmp(guess_from, "blocks") == 0) {
        if (!(st = brisk_tensor_alloc(&guess, BRISK_F32, brisk_shape2(N, F), err)))
            brisk_upsample_blocks(coarse.data, N, m->coarse, F, guess.data);
    } else if (guess_from && !(st = load_rows(guess_from, NULL, F, "first guesses of the fine fields", &guess, err)) &&
               guess.shape.d[0] != N) {
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %lld rows, but %s has %lld", guess_from,
                          (long long)guess.shape.d[0], coarse_npy, (long long)N);
    }
    if (st) goto out;
    brisk_shape shape = members > 1 ? brisk_shape3(members, N, F) : brisk_shape2(N, F);
    if ((st = brisk_tensor_alloc(&out, BRISK_F32, shape, err)) ||
        (st = brisk_inference_create(m, threads, &inf, err)) || (st = brisk_inference_load(inf, checkpoint, err)))
        goto out;
    double t0 = brisk_now();
    for (int k = 0; k < members && !st; k++)
        st = brisk_inference_sample(inf, p, N, coarse.data, m->coarse, guess.data, F,
                                    (float *)out.data + (int64_t)k * N * F, F, seed + (uint64_t)k, err);
    r.seconds = brisk_now() - t0;
    r.rows = N;
    r.members = members;
    if (!st && truth_npy) st = score(out.data, members, truth.data, coarse.data, N, m, &r, err);
    if (!st) st = brisk_npy_write(output_npy, &out, err);
    if (st) goto out;
    char sh[64];
    brisk_log(log, BRISK_LOG_INFO, "sample    %s, %d steps%s, from %s%s: %lld rows x %d members in %.2f s -> %s %s",
              p->kind == BRISK_SAMPLER_DDPM ? "ddpm" : "ddim", inf->sched.steps,
              p->kind == BRISK_SAMPLER_DDIM ? (p->eta == 0.0f ? ", eta 0" : ", eta > 0") : "",
              guess_from ? "noise around " : "pure noise", guess_from ? guess_from : "", (long long)N, members,
              r.seconds, output_npy, brisk_shape_str(&out.shape, sh, sizeof sh));
    if (truth_npy)
        brisk_log(log, BRISK_LOG_INFO,
                  "score     RMSE to %s: members %.4f, ensemble mean %.4f; spread %.4f; "
                  "baseline (coarse block values) %.4f",
                  truth_npy, r.rmse_member, r.rmse_mean, r.spread, r.rmse_baseline);
out:
    if (rep) *rep = r;
    brisk_inference_free(inf);
    brisk_tensor_free(&coarse);
    brisk_tensor_free(&truth);
    brisk_tensor_free(&out);
    brisk_tensor_free(&guess);
    brisk_config_free(&cfg);
    return st;
}
