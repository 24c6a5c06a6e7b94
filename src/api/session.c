/* The stable API of include/brisk/api.h: a session is a trainer created without data, a
 * ring of pushed samples that becomes the trainer's dataset at each train call, and an
 * inference executor that takes the trainer's parameters when they have changed. Every
 * entry point checks its arguments and records the reason of a failure in the session. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ring.h"
#include "brisk/api.h"
#include "brisk/brisk.h"

struct brisk_session {
    brisk_error err;           /* the last failure ("" after a success) */
    int ready;                 /* 0: creation failed and only err is meaningful */
    brisk_logger log;
    brisk_config cfg;
    brisk_model_io io;         /* the model's training fields: [0] input, [1] target */
    brisk_trainer *trainer;
    brisk_ring ring;
    brisk_inference *inf;      /* built on the first predict or sample */
    int inf_stale;             /* the trainer's parameters changed since inf copied them */
    brisk_run_summary last;    /* of the last train call */
    int trained;
    int64_t epochs;
    double last_loss, infer_seconds;
};

/* Clears the last error and says whether s can be used; a session whose creation failed
 * keeps the creation error and refuses every call. */
static brisk_status begin(brisk_session *s) {
    if (!s) return BRISK_ERR_INVALID;
    if (!s->ready) return BRISK_ERR_INVALID;
    s->err.code = BRISK_OK;
    s->err.msg[0] = 0;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- creation */

/* The API writes no files unless the config asks: train.out_dir defaults to "". */
static brisk_status sets_out_dir(const char *json, const char *path, int *has, brisk_error *err) {
    brisk_json *doc = NULL;
    brisk_status st = path ? brisk_json_load(path, &doc, err) : brisk_json_parse(json, strlen(json), "config", &doc, err);
    if (st) return st;
    brisk_json_reader root = brisk_json_root(doc), train;
    brisk_json_object_opt(&root, "train", &train, NULL);
    *has = brisk_json_has(&train, "out_dir");
    st = brisk_json_status(doc, err); /* a top level or "train" that is not an object */
    brisk_json_free(doc);
    return st;
}

static brisk_status setup(brisk_session *s, const char *json, const char *path) {
    brisk_error *err = &s->err;
    if (!json && !path) return brisk_errorf(err, BRISK_ERR_INVALID, "create: the config is NULL");
    int has_out = 0;
    brisk_status st = sets_out_dir(json, path, &has_out, err);
    if (st) return st;
    const char *no_files[] = {"train.out_dir=\"\""};
    st = path ? brisk_config_load(path, no_files, has_out ? 0 : 1, &s->cfg, err)
              : brisk_config_parse(json, "config", no_files, has_out ? 0 : 1, &s->cfg, err);
    if (st) return st;
    if (s->cfg.data.train[0])
        brisk_log(&s->log, BRISK_LOG_INFO, "%s: data.train (%s) is not read: a session trains on the samples pushed to it",
                  s->cfg.path, s->cfg.data.train);
    if ((st = brisk_model_fields(&s->cfg.model, BRISK_BUILD_TRAIN, &s->io, err)) ||
        (st = brisk_trainer_create_with_dataset(&s->cfg, &s->log, NULL, &s->trainer, err)))
        return st;
    const brisk_model_field *in = &s->io.fields[0], *tg = &s->io.fields[1];
    int labels = tg->dtype == BRISK_I32;
    st = brisk_ring_init(&s->ring, s->cfg.data.buffer_capacity, brisk_shape_numel(&in->sample),
                         labels ? 1 : brisk_shape_numel(&tg->sample), labels ? s->cfg.model.outputs : 0,
                         s->cfg.data.buffer_reject, err);
    if (st) return brisk_error_prefix(err, "%s", s->cfg.path);
    s->inf_stale = 1;
    brisk_log(&s->log, BRISK_LOG_INFO, "buffer    %lld samples of %s [%lld] and %s [%lld]; when full: %s",
              (long long)s->ring.cap, in->name, (long long)s->ring.w_in, tg->name, (long long)s->ring.w_tg,
              s->ring.reject ? "reject pushes" : "drop the oldest");
    return BRISK_OK;
}

static brisk_status create(const char *json, const char *path, brisk_log_fn log, void *log_user, brisk_session **out) {
    if (!out) return BRISK_ERR_INVALID;
    brisk_session *s = *out = calloc(1, sizeof *s);
    if (!s) return BRISK_ERR_NOMEM;
    s->log = (brisk_logger){log, log_user, BRISK_LOG_DEBUG};
    brisk_status st = setup(s, json, path);
    s->ready = st == BRISK_OK;
    return st;
}

brisk_status brisk_session_create(const char *config_json, brisk_log_fn log, void *log_user, brisk_session **out) {
    return create(config_json, NULL, log, log_user, out);
}

brisk_status brisk_session_create_file(const char *config_path, brisk_log_fn log, void *log_user,
                                       brisk_session **out) {
    return create(NULL, config_path, log, log_user, out);
}

brisk_status brisk_session_destroy(brisk_session *s) {
    if (!s) return BRISK_OK;
    brisk_inference_free(s->inf);
    brisk_trainer_free(s->trainer);
    brisk_ring_free(&s->ring);
    brisk_config_free(&s->cfg);
    free(s);
    return BRISK_OK;
}

const char *brisk_session_error(const brisk_session *s) {
    if (!s) return "no session (NULL): creation failed before it could hold a message, or was not attempted";
    return s->err.msg;
}

brisk_status brisk_session_sizes(brisk_session *s, int64_t *input_width, int64_t *target_width) {
    brisk_status st = begin(s);
    if (st) return st;
    if (input_width) *input_width = s->ring.w_in;
    if (target_width) *target_width = s->ring.w_tg;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- data and training */

brisk_status brisk_session_push(brisk_session *s, int64_t n, const float *input, int64_t input_stride,
                                const float *target, int64_t target_stride) {
    brisk_status st = begin(s);
    return st ? st : brisk_ring_push(&s->ring, n, input, input_stride, target, target_stride, &s->err);
}

brisk_status brisk_session_clear(brisk_session *s) {
    brisk_status st = begin(s);
    if (!st) brisk_ring_clear(&s->ring);
    return st;
}

static brisk_status train(brisk_session *s, int64_t n, int epochs) {
    brisk_status st = begin(s);
    if (st) return st;
    brisk_error *err = &s->err;
    const char *unit = epochs ? "epochs" : "steps";
    if (n < 1) return brisk_errorf(err, BRISK_ERR_INVALID, "train: %lld %s; expected at least 1", (long long)n, unit);
    if (s->ring.count == 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "train: the buffer is empty; push samples first");
    brisk_dataset ds;
    if ((st = brisk_ring_dataset(&s->ring, s->io.fields[0].name, s->io.fields[1].name, &ds, err)) ||
        (st = brisk_trainer_set_dataset(s->trainer, &ds, err)))
        return st;
    const int K = s->cfg.train.accumulate;
    int64_t steps = epochs ? n * brisk_trainer_batches_per_epoch(s->trainer) / K : n;
    if (steps < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "train: %lld epochs of %lld batches make no optimizer step of %d "
                            "accumulated batches (train.accumulate)", (long long)n,
                            (long long)brisk_trainer_batches_per_epoch(s->trainer), K);
    brisk_run_summary sum;
    if ((st = brisk_trainer_run_more(s->trainer, steps, epochs, &sum, err))) return st;
    int64_t nl = 0;
    const float *losses = brisk_trainer_losses(s->trainer, &nl);
    s->last = sum;
    s->trained = 1;
    s->epochs += sum.epochs_done;
    s->last_loss = nl ? losses[nl - 1] : NAN;
    s->inf_stale = 1;
    return BRISK_OK;
}

brisk_status brisk_session_train_epochs(brisk_session *s, int64_t epochs) { return train(s, epochs, 1); }
brisk_status brisk_session_train_steps(brisk_session *s, int64_t steps) { return train(s, steps, 0); }

brisk_status brisk_session_save(brisk_session *s, const char *path) {
    brisk_status st = begin(s);
    if (st) return st;
    if (!path) return brisk_errorf(&s->err, BRISK_ERR_INVALID, "save: the path is NULL");
    return brisk_trainer_save(s->trainer, path, &s->err);
}

brisk_status brisk_session_load(brisk_session *s, const char *path) {
    brisk_status st = begin(s);
    if (st) return st;
    if (!path) return brisk_errorf(&s->err, BRISK_ERR_INVALID, "load: the path is NULL");
    if ((st = brisk_trainer_resume(s->trainer, path, &s->err))) return st;
    s->inf_stale = 1;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- inference */

/* Checks the rows of an inference call and readies the executor with current parameters. */
static brisk_status infer_begin(brisk_session *s, const char *what, int64_t n, const void *in, int64_t *in_stride,
                                int64_t w_in, void *out, int64_t *out_stride, int64_t w_out) {
    brisk_status st = begin(s);
    if (st) return st;
    brisk_error *err = &s->err;
    if (n < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld rows; expected n >= 0", what, (long long)n);
    if (n > 0 && (!in || !out))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the %s array is NULL", what, !in ? "input" : "output");
    if (*in_stride == 0) *in_stride = w_in;
    if (*out_stride == 0) *out_stride = w_out;
    if (*in_stride < w_in || *out_stride < w_out)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %s stride %lld is shorter than a row of %lld floats", what,
                            *in_stride < w_in ? "input" : "output", (long long)(*in_stride < w_in ? *in_stride : *out_stride),
                            (long long)(*in_stride < w_in ? w_in : w_out));
    if (!s->inf && (st = brisk_inference_create(&s->cfg.model, s->cfg.speed.threads, &s->inf, err))) return st;
    if (s->inf_stale) {
        if ((st = brisk_inference_from_trainer(s->inf, s->trainer, err))) return st;
        s->inf_stale = 0;
    }
    return BRISK_OK;
}

brisk_status brisk_session_predict(brisk_session *s, int64_t n, const float *input, int64_t input_stride,
                                   float *output, int64_t output_stride) {
    if (s && s->ready && s->cfg.model.type != BRISK_MODEL_MLP)
        return brisk_errorf(&s->err, BRISK_ERR_UNSUPPORTED,
                            "predict: a diffusion model makes fine fields by sampling (brisk_session_sample)");
    const brisk_model_spec *m = s ? &s->cfg.model : NULL;
    brisk_status st = infer_begin(s, "predict", n, input, &input_stride, m ? m->inputs : 0, output, &output_stride,
                                  m ? m->outputs : 0);
    if (st) return st;
    double t0 = brisk_now();
    st = brisk_inference_predict(s->inf, n, input, input_stride, output, output_stride, &s->err);
    s->infer_seconds = brisk_now() - t0;
    return st;
}

brisk_status brisk_session_sample_guided(brisk_session *s, int64_t n, const float *coarse, int64_t coarse_stride,
                                         const float *guess, int64_t guess_stride, float *fine, int64_t fine_stride,
                                         int method, int steps, double eta, uint64_t seed) {
    if (s && s->ready && s->cfg.model.type != BRISK_MODEL_DIFFUSION)
        return brisk_errorf(&s->err, BRISK_ERR_UNSUPPORTED, "sample: only a diffusion model samples; use "
                            "brisk_session_predict for an mlp");
    const brisk_model_spec *m = s ? &s->cfg.model : NULL;
    brisk_status st = infer_begin(s, "sample", n, coarse, &coarse_stride, m ? m->coarse : 0, fine, &fine_stride,
                                  m ? m->fine : 0);
    if (st) return st;
    if (guess && guess_stride == 0) guess_stride = m->fine;
    if (guess && guess_stride < m->fine)
        return brisk_errorf(&s->err, BRISK_ERR_SHAPE, "sample: guess stride %lld is shorter than a row of %lld floats",
                            (long long)guess_stride, (long long)m->fine);
    if (method != BRISK_SAMPLER_DDPM && method != BRISK_SAMPLER_DDIM)
        return brisk_errorf(&s->err, BRISK_ERR_INVALID, "sample: method %d; expected BRISK_SAMPLER_DDPM (0) or "
                            "BRISK_SAMPLER_DDIM (1)", method);
    brisk_sample_params p = {(brisk_sampler_kind)method, steps, (float)eta};
    if (method == BRISK_SAMPLER_DDPM) p.eta = 0.0f;
    double t0 = brisk_now();
    st = brisk_inference_sample(s->inf, &p, n, coarse, coarse_stride, guess, guess_stride, fine, fine_stride, seed,
                                &s->err);
    s->infer_seconds = brisk_now() - t0;
    return st;
}

brisk_status brisk_session_sample(brisk_session *s, int64_t n, const float *coarse, int64_t coarse_stride,
                                  float *fine, int64_t fine_stride, int method, int steps, double eta,
                                  uint64_t seed) {
    return brisk_session_sample_guided(s, n, coarse, coarse_stride, NULL, 0, fine, fine_stride, method, steps, eta,
                                       seed);
}

/* ---------------------------------------------------------------- queries */

brisk_status brisk_session_query(brisk_session *s, const char *name, double *value) {
    brisk_status st = begin(s);
    if (st) return st;
    if (!name || !value) return brisk_errorf(&s->err, BRISK_ERR_INVALID, "query: %s is NULL", !name ? "name" : "value");
    const brisk_run_summary *l = &s->last;
    const double none = NAN;
    const struct { const char *name; double v; } table[] = {
        {"steps", (double)brisk_trainer_steps_done(s->trainer)},
        {"epochs", (double)s->epochs},
        {"train_loss", s->trained ? l->final_loss : none},
        {"last_loss", s->trained ? s->last_loss : none},
        {"val_loss", s->trained ? l->best_val_loss : none},
        {"val_accuracy", s->trained ? l->best_val_accuracy : none},
        {"train_seconds", s->trained ? l->wall_s : none},
        {"ms_per_step", s->trained ? l->ms_per_step_median : none},
        {"samples_per_s", s->trained ? l->samples_per_s : none},
        {"sample_seconds", s->inf ? s->infer_seconds : none},
        {"buffered", (double)s->ring.count},
        {"capacity", (double)s->ring.cap},
        {"pushed", (double)s->ring.pushed},
        {"dropped", (double)s->ring.dropped},
        {"input_width", (double)s->ring.w_in},
        {"target_width", (double)s->ring.w_tg},
    };
    const size_t n = sizeof table / sizeof table[0];
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, table[i].name) == 0) {
            *value = table[i].v;
            return BRISK_OK;
        }
    char known[512] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", table[i].name);
    return brisk_errorf(&s->err, BRISK_ERR_INVALID, "query: unknown name \"%.100s\"; known: %s", name, known);
}
