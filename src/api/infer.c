/* Predict and sample: the session's inference executor, built on first use and given the
 * trainer's parameters whenever they have changed. Inputs are checked like pushed samples
 * (finite, rows at least a row apart), so a NaN in a coarse field is an error here as it
 * is in a push, not a column of NaN in the output. */
#include <math.h>

#include "api/internal.h"

/* Checks the rows of an inference call and readies the executor with current parameters. */
static brisk_status infer_begin(api_session *s, const api_ctx *c, int64_t n, api_arg *in, const float *out,
                                api_arg *out_arg, brisk_error *err) {
    if (n < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld rows; expected n >= 0", c->fn, (long long)n);
    if (n > 0 && (!in->v || !out))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the %s array is NULL", c->fn, !in->v ? in->name : out_arg->name);
    brisk_status st;
    if ((st = api_check_stride(c, in, err)) || (st = api_check_stride(c, out_arg, err))) return st;
    if (n > 0 && (st = api_check_values(c, in, n, 0, "nothing was written", err))) return st;
    if (!s->inf && (st = brisk_inference_create(&s->cfg.model, s->cfg.speed.threads, &s->inf, err))) return st;
    if (s->inf_stale) {
        if ((st = brisk_inference_from_trainer(s->inf, s->trainer, err))) return st;
        s->inf_stale = 0;
    }
    return BRISK_OK;
}

/* Once per session, at its first inference: outputs of a model that learnt nothing. */
static void warn_untrained(api_session *s, const api_ctx *c) {
    if (s->warned_untrained || s->loaded || brisk_trainer_steps_done(s->trainer) > 0) return;
    s->warned_untrained = 1;
    brisk_log(&s->log, BRISK_LOG_WARN, "%s: the model has not been trained (no optimizer step, no checkpoint "
              "loaded): its outputs come from the initial parameters", c->fn);
}

brisk_status api_predict(api_session *s, const api_ctx *c, int64_t n, api_arg *in, float *out, api_arg *out_arg,
                         brisk_error *err) {
    if (s->cfg.model.type == BRISK_MODEL_DIFFUSION)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: a diffusion model makes fine fields by sampling (%s)",
                            c->fn, c->fortran ? "brisk_sample" : "brisk_session_sample");
    brisk_status st = infer_begin(s, c, n, in, out, out_arg, err);
    if (st) return st;
    warn_untrained(s, c);
    double t0 = brisk_now();
    st = brisk_inference_predict(s->inf, n, in->v, in->stride, out, out_arg->stride, err);
    s->infer_seconds = brisk_now() - t0;
    return st;
}

brisk_status api_sample(api_session *s, const api_ctx *c, int64_t n, api_arg *coarse, api_arg *guess, float *fine,
                        api_arg *fine_arg, int method, int steps, double eta, uint64_t seed, brisk_error *err) {
    if (s->cfg.model.type != BRISK_MODEL_DIFFUSION)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: only a diffusion model samples; this session's model "
                            "(%s) predicts: use %s", c->fn,
                            s->cfg.model.graph ? "a graph or an imported ONNX network" : brisk_model_type_name(s->cfg.model.type),
                            c->fortran ? "brisk_predict" : "brisk_session_predict");
    brisk_status st = infer_begin(s, c, n, coarse, fine, fine_arg, err);
    if (st) return st;
    if (guess->v && ((st = api_check_stride(c, guess, err)) ||
                     (n > 0 && (st = api_check_values(c, guess, n, 0, "nothing was written", err)))))
        return st;
    if (method != BRISK_SAMPLER_DDPM && method != BRISK_SAMPLER_DDIM)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: method %d; expected BRISK_SAMPLER_DDPM (0) or "
                            "BRISK_SAMPLER_DDIM (1)", c->fn, method);
    brisk_sample_params p = {(brisk_sampler_kind)method, steps, (float)eta};
    if (method == BRISK_SAMPLER_DDPM) p.eta = 0.0f;
    warn_untrained(s, c);
    double t0 = brisk_now();
    st = brisk_inference_sample(s->inf, &p, n, coarse->v, coarse->stride, guess->v, guess->stride, fine,
                                fine_arg->stride, seed, err);
    s->infer_seconds = brisk_now() - t0;
    return st ? brisk_error_prefix(err, "%s", c->fn) : BRISK_OK;
}

brisk_status brisk_session_predict(brisk_session *h, int64_t n, const float *input, int64_t input_stride,
                                   float *output, int64_t output_stride) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_WORK);
    if (!st) {
        api_arg in = {"input", input, input_stride, c.s->row_in}, out = {"output", output, output_stride, c.s->row_out};
        st = api_predict(c.s, &(api_ctx){"predict", 0}, n, &in, output, &out, &c.err);
    }
    return api_leave(&c, st);
}

brisk_status brisk_session_sample_guided(brisk_session *h, int64_t n, const float *coarse, int64_t coarse_stride,
                                         const float *guess, int64_t guess_stride, float *fine, int64_t fine_stride,
                                         int method, int steps, double eta, uint64_t seed) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_WORK);
    if (!st) {
        const brisk_model_spec *m = &c.s->cfg.model;
        api_arg in = {"coarse", coarse, coarse_stride, m->coarse}, g = {"guess", guess, guess_stride, m->fine},
                out = {"fine", fine, fine_stride, m->fine};
        st = api_sample(c.s, &(api_ctx){"sample", 0}, n, &in, &g, fine, &out, method, steps, eta, seed, &c.err);
    }
    return api_leave(&c, st);
}

brisk_status brisk_session_sample(brisk_session *h, int64_t n, const float *coarse, int64_t coarse_stride,
                                  float *fine, int64_t fine_stride, int method, int steps, double eta,
                                  uint64_t seed) {
    return brisk_session_sample_guided(h, n, coarse, coarse_stride, NULL, 0, fine, fine_stride, method, steps, eta,
                                       seed);
}
