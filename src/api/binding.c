/* The way in for bindings/fortran/brisk.f90 (not part of the stable C API, which keeps its
 * strides). A Fortran caller passes whole arrays, one sample per column, and the binding
 * hands over their shapes: the first dimension must be exactly the model's width (a
 * coarse(8, n) is a mistake, not 7 values and a padding), both arrays of a call must have
 * as many columns, and messages speak of the binding's arguments with 1-based
 * (element, sample) indices. */
#include "api/internal.h"

#define F_CTX(name) (api_ctx){name, 1}

/* The first dimension of `name` against the model's width `w` (what the field is called). */
static brisk_status leading(brisk_error *err, const api_ctx *c, const char *name, int64_t rows, int64_t cols,
                            int64_t w, const char *field) {
    if (rows == w) return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %s has shape (%lld, %lld); expected (%lld, n): %lld %s values "
                        "per sample, one sample per column (for one sample: an array of shape (%lld, 1))", c->fn, name,
                        (long long)rows, (long long)cols, (long long)w, (long long)w, field, (long long)w);
}

static brisk_status columns(brisk_error *err, const api_ctx *c, const char *a, int64_t na, const char *b, int64_t nb) {
    if (na == nb) return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %s has %lld samples (columns) and %s has %lld; expected the "
                        "same number", c->fn, a, (long long)na, b, (long long)nb);
}

brisk_status brisk_f_push(brisk_session *h, int64_t in_rows, int64_t in_cols, const float *input, int64_t tg_rows,
                          int64_t tg_cols, const float *target) {
    api_call call;
    brisk_status st = api_enter(h, &call, API_FREE);
    if (st) return api_leave(&call, st);
    api_session *s = call.s;
    const api_ctx c = F_CTX("brisk_push");
    const char *in_field = s->io.fields[0].name, *tg_field = s->ring.classes ? "class label" : s->io.fields[1].name;
    if (!(st = leading(&call.err, &c, "input", in_rows, in_cols, s->ring.w_in, in_field)) &&
        !(st = leading(&call.err, &c, "target", tg_rows, tg_cols, s->ring.w_tg, tg_field)) &&
        !(st = columns(&call.err, &c, "input", in_cols, "target", tg_cols))) {
        api_arg in = {"input", input, in_rows, s->ring.w_in}, tg = {"target", target, tg_rows, s->ring.w_tg};
        st = api_push(s, &c, in_cols, &in, &tg, &call.err);
    }
    return api_leave(&call, st);
}

brisk_status brisk_f_predict(brisk_session *h, int64_t in_rows, int64_t in_cols, const float *input, int64_t out_rows,
                             int64_t out_cols, float *output) {
    api_call call;
    brisk_status st = api_enter(h, &call, API_WORK);
    if (st) return api_leave(&call, st);
    api_session *s = call.s;
    const api_ctx c = F_CTX("brisk_predict");
    const brisk_model_spec *m = &s->cfg.model;
    if (m->type != BRISK_MODEL_DIFFUSION &&
        !(st = leading(&call.err, &c, "input", in_rows, in_cols, s->row_in, "input")) &&
        !(st = leading(&call.err, &c, "output", out_rows, out_cols, s->row_out, "output")))
        st = columns(&call.err, &c, "input", in_cols, "output", out_cols);
    if (!st) {
        api_arg in = {"input", input, in_rows, s->row_in}, out = {"output", output, out_rows, s->row_out};
        st = api_predict(s, &c, in_cols, &in, output, &out, &call.err);
    }
    return api_leave(&call, st);
}

brisk_status brisk_f_sample(brisk_session *h, int64_t c_rows, int64_t c_cols, const float *coarse, int64_t g_rows,
                            int64_t g_cols, const float *guess, int64_t f_rows, int64_t f_cols, float *fine, int method,
                            int steps, double eta, uint64_t seed) {
    api_call call;
    brisk_status st = api_enter(h, &call, API_WORK);
    if (st) return api_leave(&call, st);
    api_session *s = call.s;
    const api_ctx c = F_CTX("brisk_sample");
    const brisk_model_spec *m = &s->cfg.model;
    if (m->type == BRISK_MODEL_DIFFUSION && !(st = leading(&call.err, &c, "coarse", c_rows, c_cols, m->coarse, "coarse")) &&
        !(st = leading(&call.err, &c, "fine", f_rows, f_cols, m->fine, "fine")) &&
        !(st = columns(&call.err, &c, "coarse", c_cols, "fine", f_cols)) && g_rows >= 0 &&
        !(st = leading(&call.err, &c, "guess", g_rows, g_cols, m->fine, "fine")))
        st = columns(&call.err, &c, "guess", g_cols, "fine", f_cols);
    if (!st) {
        api_arg in = {"coarse", coarse, c_rows, m->coarse}, g = {"guess", g_rows >= 0 ? guess : NULL, g_rows, m->fine},
                out = {"fine", fine, f_rows, m->fine};
        st = api_sample(s, &c, c_cols, &in, &g, fine, &out, method, steps, eta, seed, &call.err);
    }
    return api_leave(&call, st);
}
