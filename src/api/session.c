/* The stable API of include/brisk/api.h: a session is a trainer created without data, a
 * ring of pushed samples that becomes the trainer's dataset at each train call, and an
 * inference executor (infer.c) that takes the trainer's parameters when they have changed.
 * Every entry point resolves its handle (handles.c), checks its arguments and records the
 * reason of a failure in the session. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define C_CTX(name) (api_ctx){name, 0}

/* ---------------------------------------------------------------- creation */

/* The trainer's side of a stop: the session's flag, set by brisk_session_request_stop. */
static int stop_fn(void *user) { return api_stop_requested(user) ? BRISK_STOP_REQUESTED : 0; }

/* The config as `brisk train` reads it, with a session's own defaults: train.out_dir "" (the
 * API writes no files unless asked) and train.checkpoint_epochs 0 (a session's epochs are
 * passes over its buffer, often one per call: a checkpoint at each would cost what the
 * policy in api.h avoids). The "session" section is read with the rest (config.c). */
static brisk_status read_config(api_session *s, const char *json, const char *path) {
    brisk_error *err = &s->err;
    brisk_json *doc = NULL;
    brisk_status st = path ? brisk_json_load(path, &doc, err) : brisk_json_parse(json, strlen(json), "config", &doc, err);
    if (st) return st;
    brisk_json_reader root = brisk_json_root(doc), train;
    brisk_json_object_opt(&root, "train", &train, NULL);
    int has_out = brisk_json_has(&train, "out_dir"), has_epochs = brisk_json_has(&train, "checkpoint_epochs");
    char *text = NULL;
    cJSON *tree = brisk_json_tree(doc), *tr = cJSON_GetObjectItemCaseSensitive(tree, "train");
    if (!tr) tr = cJSON_AddObjectToObject(tree, "train");
    /* a "train" that is no object is left for the config's own message */
    if (!has_out && cJSON_IsObject(tr) && !cJSON_AddStringToObject(tr, "out_dir", ""))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "create: out of memory");
    if (!st && !has_epochs && cJSON_IsObject(tr) && !cJSON_AddNumberToObject(tr, "checkpoint_epochs", 0))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "create: out of memory");
    if (!st) st = brisk_json_dump(doc, &text, err);
    brisk_json_free(doc);
    if (!st) st = brisk_config_parse(text, path ? path : "config", NULL, 0, &s->cfg, err);
    free(text);
    return st;
}

/* session.resume: a previous run in train.out_dir (checkpoints, metrics) is refused, as
 * `brisk train` refuses one without --resume or --overwrite, continued from its newest intact
 * checkpoint, or removed. A restarted simulation that forgot to say which would otherwise
 * number its steps from 0 again and rotate away the checkpoints it meant to continue from. */
static brisk_status claim_run_dir(api_session *s) {
    brisk_error *err = &s->err;
    brisk_status st;
    if (s->cfg.session.resume == BRISK_SESSION_AUTO) {
        int resumed = 0;
        if ((st = brisk_trainer_resume_auto(s->trainer, &resumed, err))) return st;
        s->loaded = resumed;
        return BRISK_OK;
    }
    st = brisk_trainer_lock_run_dir(s->trainer, s->cfg.session.resume == BRISK_SESSION_OVERWRITE,
                                    "set \"session\": {\"resume\": \"auto\"} to continue it from its newest "
                                    "checkpoint, or {\"resume\": \"overwrite\"} to replace it", err);
    return st ? brisk_error_prefix(err, "%s", s->cfg.path) : BRISK_OK;
}

static brisk_status setup(api_session *s, const char *json, const char *path) {
    brisk_error *err = &s->err;
    if (!json && !path) return brisk_errorf(err, BRISK_ERR_INVALID, "create: the config is NULL");
    brisk_status st = read_config(s, json, path);
    if (st) return st;
    const brisk_session_spec *ss = &s->cfg.session;
    /* a session's rows are one input and one target of fixed width: what these two read */
    brisk_model_type type = s->cfg.model.type;
    int rows = type == BRISK_MODEL_DIFFUSION || brisk_model_row_widths(&s->cfg.model, &s->row_in, &s->row_out);
    if (!s->cfg.n_models && type == BRISK_MODEL_GRAPH && rows) { /* and one target: what a pushed row holds */
        brisk_model_io io;
        rows = brisk_model_fields(&s->cfg.model, BRISK_BUILD_TRAIN, &io, NULL) == BRISK_OK && io.n_fields == 2;
    }
    if (s->cfg.n_models || !rows)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: %s: a session trains model.type \"mlp\", \"diffusion\", "
                            "or a \"graph\" or \"onnx\" model of one f32 input, one target and one output (a row "
                            "each, of a sample's values in C order); train this model from files with `brisk train` "
                            "(brisk.train in Python, brisk_train_run in C)", s->cfg.path,
                            s->cfg.n_models ? "a pipeline (\"models\")" : type == BRISK_MODEL_GRAPH
                            ? "this graph model" : brisk_model_type_name(type));
    if (s->cfg.data.train[0])
        brisk_log(&s->log, BRISK_LOG_INFO, "%s: data.train (%s) is not read: a session trains on the samples pushed to it",
                  s->cfg.path, s->cfg.data.train);
    if ((st = brisk_model_fields(&s->cfg.model, BRISK_BUILD_TRAIN, &s->io, err)) ||
        (st = brisk_trainer_create_with_dataset(&s->cfg, &s->log, NULL, &s->trainer, err)))
        return st;
    brisk_trainer_set_control(s->trainer, &(brisk_trainer_control){stop_fn, s, 1, NULL, NULL});
    /* data parallel over the host's ranks, each pushing its own samples; before the run
     * directory is claimed, which rank 0 alone then does */
    if (ss->mpi_comm >= 0 && ((st = brisk_dist_create_fortran_comm(&s->dist, ss->mpi_comm, err)) ||
                              (st = brisk_trainer_set_dist(s->trainer, s->dist, 1, err))))
        return brisk_error_prefix(err, "%s: session.mpi_comm %lld", s->cfg.path, (long long)ss->mpi_comm);
    /* the run directory is this session's from now on, not from its first train call */
    if (s->cfg.train.out_dir[0] && (st = claim_run_dir(s))) return st;
    const brisk_model_field *in = &s->io.fields[0], *tg = &s->io.fields[1];
    int labels = tg->dtype == BRISK_I32;
    st = brisk_ring_init(&s->ring, s->cfg.data.buffer_capacity, brisk_shape_numel(&in->sample),
                         labels ? 1 : brisk_shape_numel(&tg->sample), labels ? s->cfg.model.outputs : 0,
                         s->cfg.data.buffer_reject, err);
    if (st) return brisk_error_prefix(err, "%s", s->cfg.path);
    if (ss->stop_signals) {
        if (api_signals_acquire() != BRISK_OK)
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "session.stop_signals: cannot install the signal handlers");
        s->stop_signals = 1;
    }
    s->inf_stale = 1;
    brisk_log(&s->log, BRISK_LOG_INFO, "buffer    %lld samples of %s [%lld] and %s [%lld]; when full: %s",
              (long long)s->ring.cap, in->name, (long long)s->ring.w_in, tg->name, (long long)s->ring.w_tg,
              s->ring.reject ? "reject pushes" : "drop the oldest");
    const brisk_train_spec *tr = &s->cfg.train;
    if (tr->out_dir[0]) {
        char every[64] = "";
        if (tr->checkpoint_every > 0) snprintf(every, sizeof every, "every %lld steps, ", (long long)tr->checkpoint_every);
        char minutes[64] = "";
        if (tr->checkpoint_minutes > 0) snprintf(minutes, sizeof minutes, "every %g minutes, ", tr->checkpoint_minutes);
        brisk_log(&s->log, BRISK_LOG_INFO, "checkpoints %s/last.safetensors: %s%swhen stopped, and by brisk_session_save",
                  tr->out_dir, every, minutes);
    }
    return BRISK_OK;
}

static void free_session(api_session *s) {
    if (!s) return;
    if (s->stop_signals) api_signals_release();
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->ring_lock);
    brisk_inference_free(s->inf);
    brisk_trainer_free(s->trainer);
    brisk_dist_free(s->dist);
    brisk_ring_free(&s->ring);
    brisk_config_free(&s->cfg);
    free(s);
}

static brisk_status create(const char *json, const char *path, brisk_log_fn log, void *log_user, brisk_session **out) {
    if (!out) return BRISK_ERR_INVALID;
    fenv_t fe;
    fegetenv(&fe);
    *out = NULL;
    api_session *s = calloc(1, sizeof *s);
    if (!s) return BRISK_ERR_NOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->ring_lock, NULL);
    if (!(*out = api_handle_new(s))) {
        free_session(s);
        return BRISK_ERR_NOMEM; /* every slot taken: brisk_session_error(NULL) says what NULL means */
    }
    s->log = (brisk_logger){log, log_user, BRISK_LOG_DEBUG};
    brisk_status st = setup(s, json, path);
    s->ready = st == BRISK_OK;
    if (st) { /* keep only the message: the run directory's lock and memory go now */
        brisk_trainer_free(s->trainer);
        s->trainer = NULL;
        brisk_dist_free(s->dist);
        s->dist = NULL;
    }
    fesetenv(&fe);
    return st;
}

brisk_status brisk_session_create(const char *config_json, brisk_log_fn log, void *log_user, brisk_session **out) {
    return create(config_json, NULL, log, log_user, out);
}

brisk_status brisk_session_create_file(const char *config_path, brisk_log_fn log, void *log_user,
                                       brisk_session **out) {
    return create(NULL, config_path, log, log_user, out);
}

brisk_status brisk_session_destroy(brisk_session *h) {
    if (!h) return BRISK_OK;
    const char *why;
    api_session *s = api_handle_retire(h, &why);
    if (!s) return h && why && strncmp(why, "destroy:", 8) == 0 ? BRISK_BUSY : BRISK_ERR_INVALID;
    fenv_t fe;
    fegetenv(&fe);
    free_session(s);
    fesetenv(&fe);
    return BRISK_OK;
}

brisk_status brisk_session_sizes(brisk_session *h, int64_t *input_width, int64_t *target_width) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_FREE);
    if (!st && input_width) *input_width = c.s->ring.w_in;
    if (!st && target_width) *target_width = c.s->ring.w_tg;
    return api_leave(&c, st);
}

/* ---------------------------------------------------------------- data */

brisk_status api_push(api_session *s, const api_ctx *c, int64_t n, api_arg *in, api_arg *tg, brisk_error *err) {
    if (n < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld samples; expected n >= 0", c->fn, (long long)n);
    if (n == 0) return BRISK_OK;
    if (!in->v || !tg->v)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s is NULL", c->fn, !in->v ? in->name : tg->name);
    brisk_status st;
    if ((st = api_check_stride(c, in, err)) || (st = api_check_stride(c, tg, err))) return st;
    const brisk_ring *r = &s->ring;
    /* what n alone decides comes before any row is read: a reject buffer that cannot take them */
    pthread_mutex_lock(&s->ring_lock);
    st = brisk_ring_room(r, n, err);
    pthread_mutex_unlock(&s->ring_lock);
    if (st) return brisk_error_prefix(err, "%s", c->fn);
    if ((st = api_check_values(c, in, n, 0, "nothing was added", err)) ||
        (st = api_check_values(c, tg, n, r->classes, "nothing was added", err)))
        return st;
    pthread_mutex_lock(&s->ring_lock);
    int64_t dropped = s->ring.dropped;
    st = brisk_ring_push(&s->ring, n, in->v, in->stride, tg->v, tg->stride, err);
    int first_drop = dropped == 0 && s->ring.dropped > 0;
    int64_t cap = s->ring.cap, now = s->ring.dropped;
    pthread_mutex_unlock(&s->ring_lock);
    if (st) return brisk_error_prefix(err, "%s", c->fn);
    /* once: a host that pushes more than it trains on loses its oldest samples quietly else */
    if (first_drop)
        brisk_log(&s->log, BRISK_LOG_WARN, "%s: the buffer holds %lld samples and is full: the oldest are dropped "
                  "(%lld so far; the \"dropped\" query counts them). Raise data.buffer.capacity, train more often, "
                  "or set data.buffer.when_full \"reject\"", c->fn, (long long)cap, (long long)now);
    return BRISK_OK;
}

brisk_status brisk_session_push(brisk_session *h, int64_t n, const float *input, int64_t input_stride,
                                const float *target, int64_t target_stride) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_FREE);
    if (!st) {
        api_session *s = c.s;
        api_arg in = {"input", input, input_stride, s->ring.w_in}, tg = {"target", target, target_stride, s->ring.w_tg};
        st = api_push(s, &C_CTX("push"), n, &in, &tg, &c.err);
    }
    return api_leave(&c, st);
}

brisk_status brisk_session_clear(brisk_session *h) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_FREE);
    if (!st) {
        pthread_mutex_lock(&c.s->ring_lock);
        brisk_ring_clear(&c.s->ring);
        pthread_mutex_unlock(&c.s->ring_lock);
    }
    return api_leave(&c, st);
}

/* ---------------------------------------------------------------- training */

static int stop_pending(const api_session *s) { return brisk_signal_pending() || api_stop_requested(s); }

/* BRISK_STOPPED with what was done of what was asked ("the 3 epochs") and where the work is kept. */
static brisk_status stopped(api_session *s, const char *fn, int64_t done, int64_t asked, const char *unit,
                            brisk_error *err) {
    int sig = brisk_signal_pending();
    const char *ckpt = brisk_trainer_last_checkpoint(s->trainer);
    char kept[BRISK_PATH_MAX + 96];
    if (s->cfg.train.out_dir[0]) snprintf(kept, sizeof kept, "checkpoint %s written", ckpt);
    else snprintf(kept, sizeof kept, "no checkpoint written (train.out_dir is \"\"): save one with brisk_session_save");
    return brisk_errorf(err, BRISK_STOPPED, "%s: stopped by %s after step %lld (%lld steps done of the %lld %s "
                        "asked for); %s", fn, sig ? brisk_signal_name(sig) : "a stop request",
                        (long long)brisk_trainer_steps_done(s->trainer), (long long)done, (long long)asked, unit, kept);
}

static brisk_status train(api_session *s, int64_t n, int epochs, brisk_error *err) {
    const char *fn = epochs ? "train_epochs" : "train_steps", *unit = epochs ? "epochs" : "steps";
    brisk_status st;
    if (n < 1) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld %s; expected at least 1", fn, (long long)n, unit);
    /* A stop asked for between calls: no step, but the checkpoint the caller will rely on. */
    if (stop_pending(s)) {
        if ((st = brisk_trainer_checkpoint(s->trainer, err))) return st;
        return stopped(s, fn, 0, n, unit, err);
    }
    /* the buffer as it is now: rows pushed from other threads during the call wait for the next */
    brisk_dataset ds;
    pthread_mutex_lock(&s->ring_lock);
    int empty = s->ring.count == 0;
    st = empty ? BRISK_OK : brisk_ring_dataset(&s->ring, s->io.fields[0].name, s->io.fields[1].name, &ds, err);
    pthread_mutex_unlock(&s->ring_lock);
    if (empty) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the buffer is empty; push samples first", fn);
    if (st || (st = brisk_trainer_set_dataset(s->trainer, &ds, err))) return brisk_error_prefix(err, "%s", fn);
    const int K = s->cfg.train.accumulate;
    int64_t steps = epochs ? n * brisk_trainer_batches_per_epoch(s->trainer) / K : n;
    if (brisk_dist_world(s->dist) > 1) { /* every rank must run as many steps: the fewest any rank has */
        double v[2] = {-(double)steps, (double)steps};
        if ((st = brisk_dist_allreduce_max(s->dist, v, 2, "step count agreement", brisk_trainer_steps_done(s->trainer), err)))
            return brisk_error_prefix(err, "%s", fn);
        if (!epochs && v[1] != -v[0])
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld steps on rank %d, but other ranks asked for %.0f to %.0f: "
                                "every rank must train the same number of steps", fn, (long long)n,
                                brisk_dist_rank(s->dist), -v[0], v[1]);
        steps = (int64_t)-v[0];
    }
    if (steps < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld epochs of %lld batches make no optimizer step of %d "
                            "accumulated batches (train.accumulate)", fn, (long long)n,
                            (long long)brisk_trainer_batches_per_epoch(s->trainer), K);
    int64_t before = brisk_trainer_steps_done(s->trainer);
    brisk_run_summary sum;
    if ((st = brisk_trainer_run_more(s->trainer, steps, epochs, &sum, err))) return brisk_error_prefix(err, "%s", fn);
    int64_t nl = 0;
    const float *losses = brisk_trainer_losses(s->trainer, &nl);
    s->last = sum;
    s->trained = 1;
    s->epochs += sum.epochs_done;
    s->last_loss = nl ? losses[nl - 1] : NAN;
    s->inf_stale = 1;
    return sum.stopped_by_signal ? stopped(s, fn, sum.steps - before, steps, "steps", err) : BRISK_OK;
}

brisk_status brisk_session_train_epochs(brisk_session *h, int64_t epochs) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_WORK);
    if (!st) st = train(c.s, epochs, 1, &c.err);
    return api_leave(&c, st);
}

brisk_status brisk_session_train_steps(brisk_session *h, int64_t steps) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_WORK);
    if (!st) st = train(c.s, steps, 0, &c.err);
    return api_leave(&c, st);
}

brisk_status brisk_session_save(brisk_session *h, const char *path) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_WORK);
    if (!st && !path) st = brisk_errorf(&c.err, BRISK_ERR_INVALID, "save: the path is NULL");
    if (!st) st = brisk_trainer_save(c.s->trainer, path, &c.err);
    return api_leave(&c, st);
}

brisk_status brisk_session_load(brisk_session *h, const char *path) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_WORK);
    if (!st && !path) st = brisk_errorf(&c.err, BRISK_ERR_INVALID, "load: the path is NULL");
    if (!st && !(st = brisk_trainer_resume(c.s->trainer, path, &c.err))) c.s->inf_stale = c.s->loaded = 1;
    return api_leave(&c, st);
}

/* ---------------------------------------------------------------- queries */

static brisk_status query(api_session *s, const char *name, double *value, brisk_error *err) {
    if (!name || !value) return brisk_errorf(err, BRISK_ERR_INVALID, "query: %s is NULL", !name ? "name" : "value");
    const brisk_run_summary *l = &s->last;
    const double none = NAN;
    pthread_mutex_lock(&s->ring_lock);
    const brisk_ring r = s->ring;
    pthread_mutex_unlock(&s->ring_lock);
    const struct { const char *name; double v; } table[] = {
        {"steps", (double)brisk_trainer_steps_done(s->trainer)},
        {"epochs", (double)s->epochs},
        {"train_loss", s->trained ? l->final_loss : none},
        {"last_loss", s->trained ? s->last_loss : none},
        {"val_loss", s->trained ? l->run_best_val_loss : none}, /* the call's own, not a loaded checkpoint's */
        {"val_accuracy", s->trained ? l->run_best_val_accuracy : none},
        {"train_seconds", s->trained ? l->wall_s : none},
        {"ms_per_step", s->trained ? l->ms_per_step_median : none},
        {"samples_per_s", s->trained ? l->samples_per_s : none},
        {"sample_seconds", s->inf ? s->infer_seconds : none},
        {"buffered", (double)r.count},
        {"capacity", (double)r.cap},
        {"pushed", (double)r.pushed},
        {"dropped", (double)r.dropped},
        {"input_width", (double)r.w_in},
        {"target_width", (double)r.w_tg},
        {"output_width", (double)(s->cfg.model.type == BRISK_MODEL_DIFFUSION ? r.w_tg : s->row_out)},
        {"stop_requested", (double)stop_pending(s)},
        {"stop_signal", (double)brisk_signal_pending()},
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
    return brisk_errorf(err, BRISK_ERR_INVALID, "query: unknown name \"%.100s\"; known: %s", name, known);
}

brisk_status brisk_session_query(brisk_session *h, const char *name, double *value) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_READ);
    if (!st) st = query(c.s, name, value, &c.err);
    return api_leave(&c, st);
}
