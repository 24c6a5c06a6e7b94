/* Sampling schedules for the diffusion denoiser (DDPM ancestral, DDIM with eta) and the
 * graph of one sampling step. The coefficients are computed once in double from the
 * same float32 abar table training uses, and become constant tables gathered by the
 * timestep input: a sampling step is then one replay of one schedule whose only
 * per-step input is t (on CUDA, the whole loop is one captured graph; see nn.h). */
#include "brisk/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void brisk_sample_schedule_free(brisk_sample_schedule *s) {
    if (!s) return;
    free(s->t);
    free(s->a); /* b and c live in the same block */
    memset(s, 0, sizeof *s);
}

brisk_status brisk_sample_schedule_make(const brisk_model_spec *spec, brisk_sampler_kind kind, int steps,
                                        float eta, brisk_sample_schedule *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (spec->type != BRISK_MODEL_DIFFUSION)
        return brisk_errorf(err, BRISK_ERR_INVALID, "sampling needs a diffusion model; this one is an mlp");
    const int T = spec->noise_steps;
    if (kind != BRISK_SAMPLER_DDPM && kind != BRISK_SAMPLER_DDIM)
        return brisk_errorf(err, BRISK_ERR_INVALID, "sampler %d: expected ddpm (0) or ddim (1)", (int)kind);
    if (steps == 0) steps = T;
    if (kind == BRISK_SAMPLER_DDPM && steps != T)
        return brisk_errorf(err, BRISK_ERR_INVALID, "ddpm sampling takes all %d noise steps of the model, not %d; "
                            "ddim samples with fewer", T, steps);
    if (steps < 1 || steps > T)
        return brisk_errorf(err, BRISK_ERR_INVALID, "ddim sampling steps %d: expected 1 to %d (the model's noise steps)",
                            steps, T);
    if (!(eta >= 0.0f && eta <= 1.0f))
        return brisk_errorf(err, BRISK_ERR_INVALID, "eta %g: expected a number in [0, 1]", (double)eta);
    float *abar = malloc(sizeof(float) * (size_t)T);
    out->t = malloc(sizeof(int32_t) * (size_t)steps);
    out->a = calloc(3 * (size_t)T, sizeof(float));
    if (!abar || !out->t || !out->a) {
        free(abar);
        brisk_sample_schedule_free(out);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "sampling schedule: out of memory");
    }
    out->b = out->a + T;
    out->c = out->a + 2 * T;
    out->kind = kind;
    out->steps = steps;
    out->noise_steps = T;
    out->eta = kind == BRISK_SAMPLER_DDIM ? eta : 1.0f;
    brisk_ddpm_alpha_bar(T, spec->beta_start, spec->beta_end, abar);
    for (int k = 0; k < steps; k++)
        out->t[k] = steps == 1 ? T - 1 : (int32_t)lround((double)(T - 1) * (double)(steps - 1 - k) / (double)(steps - 1));
    for (int k = 0; k < steps; k++) {
        int t = out->t[k], p = k + 1 < steps ? out->t[k + 1] : -1;
        double ab = abar[t], abp = p >= 0 ? abar[p] : 1.0, a, b, c;
        if (kind == BRISK_SAMPLER_DDPM) {
            double alpha = ab / abp, beta = 1.0 - alpha;
            a = 1.0 / sqrt(alpha);
            b = -beta / (sqrt(alpha) * sqrt(1.0 - ab));
            c = sqrt(beta * (1.0 - abp) / (1.0 - ab));
        } else {
            double sigma = eta * sqrt((1.0 - abp) / (1.0 - ab)) * sqrt(1.0 - ab / abp);
            double rest = 1.0 - abp - sigma * sigma;
            a = sqrt(abp / ab);
            b = sqrt(rest > 0 ? rest : 0.0) - sqrt(abp * (1.0 - ab) / ab);
            c = sigma;
        }
        if (spec->predict_x0) { /* eps_hat = (x_t - sqrt(ab) x0_hat) / sqrt(1 - ab) */
            a += b / sqrt(1.0 - ab);
            b = -b * sqrt(ab) / sqrt(1.0 - ab);
        }
        out->a[t] = (float)a;
        out->b[t] = (float)b;
        out->c[t] = (float)c;
        out->stochastic |= out->c[t] > 0.0f;
    }
    out->start_signal = sqrtf(abar[out->t[0]]);
    out->start_noise = sqrtf(1.0f - abar[out->t[0]]);
    free(abar);
    return BRISK_OK;
}

/* A [T] table gathered by t as a [batch, 1] column that broadcasts over the fine values. */
static int per_row(brisk_graph *g, const char *name, const float *table, int T, int t, int64_t batch) {
    int c = brisk_const(g, name, BRISK_F32, brisk_shape1(T), table);
    return brisk_reshape(g, brisk_gather(g, c, t), brisk_shape2(batch, 1));
}

brisk_status brisk_diffusion_build_sample_step(const brisk_model_spec *spec, const brisk_sample_schedule *s,
                                               int64_t batch, brisk_graph *g, brisk_model_io *io, brisk_error *err) {
    brisk_status st = brisk_model_build(spec, batch, BRISK_BUILD_PREDICT, g, io, err);
    if (st) return st;
    if (s->noise_steps != spec->noise_steps)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "sampling schedule for %d noise steps, model has %d", s->noise_steps,
                            spec->noise_steps);
    /* brisk_model_fields orders the PREDICT inputs coarse, x_t, t */
    int x = g->inputs[io->input_node[1]].node, t = g->inputs[io->input_node[2]].node, eps = io->output;
    const int T = s->noise_steps;
    int a = per_row(g, "sample.a", s->a, T, t, batch), b = per_row(g, "sample.b", s->b, T, t, batch);
    int next = brisk_add(g, brisk_mul(g, a, x), brisk_mul(g, b, eps));
    if (s->stochastic) {
        int c = per_row(g, "sample.c", s->c, T, t, batch);
        next = brisk_add(g, next, brisk_mul(g, c, brisk_randn(g, brisk_shape2(batch, spec->fine))));
    }
    io->output = g->output = next;
    return brisk_graph_error(g, err);
}
