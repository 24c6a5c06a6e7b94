/* brisk profile: where a step's time goes, node by node, without an external profiler.
 *
 * The trainer is built as brisk train builds it and runs eagerly (a CUDA graph would hide
 * the nodes). After the warm-up, steps alternate: a plain step whose start and end alone are
 * marked, and a timed one with a mark before every node of each training run and after its
 * last (the executor's node hook), so that the time between two marks is one node's, the
 * gap before the first node is the batch coming in and the gap after the last is the loss
 * and the optimizer update. On a device the marks are events recorded on the compute stream
 * (be->mark) and read after a sync at the step's end, so the timing changes the step only
 * by the events themselves and that sync; on the CPU, whose run_node returns when its work
 * is done, the host clock. The plain steps' median beside the timed ones' shows what the
 * marks cost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "brisk/cuda.h"
#include "train/trainer_internal.h"

enum { MARK_BEGIN = -2, MARK_RUN_END = -1, MARK_END = -3 };

typedef struct brisk_profiler {
    brisk_trainer *t;
    int64_t first;          /* the first step after the warm-up */
    int timing;             /* this step marks its nodes */
    int slot;               /* the next mark */
    int *mark_id;           /* per mark of this step: the node after it, or MARK_* */
    double *host;           /* per mark: the host clock (no be->mark) */
    int width;              /* n_nodes + 2: a timed step's row of node_ms */
    double *node_ms;        /* per timed step, per node, then the gaps before the first node
                               and after a run's last: [step * width + node] */
    int *node_calls;        /* per node: runs over the timed steps */
    double *marked, *plain; /* step times (ms) of the timed and of the plain steps */
    int n_marked, n_plain, cap_steps;
} brisk_profiler;

static brisk_status mark(brisk_profiler *p, int id, brisk_error *err) {
    if (p->slot >= BRISK_MAX_MARKS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "profile: more than %d node runs in a step", BRISK_MAX_MARKS - 2);
    brisk_backend *be = p->t->be;
    p->mark_id[p->slot] = id;
    if (be->mark) {
        brisk_status st = be->mark(be, p->slot, err);
        if (st) return st;
    } else {
        p->host[p->slot] = brisk_now();
    }
    p->slot++;
    return BRISK_OK;
}

static brisk_status node_hook(void *user, int pos, int id, brisk_error *err) {
    (void)pos;
    return mark(user, id >= 0 ? id : MARK_RUN_END, err);
}

brisk_status brisk_profile_step_begin(brisk_trainer *t, brisk_error *err) {
    brisk_profiler *p = t->prof;
    p->slot = 0;
    /* the last warm-up step marks its nodes too, untimed: the device's events are made then */
    p->timing = t->step >= p->first ? (t->step - p->first) % 2 == 1 : t->step == p->first - 1;
    brisk_exec_set_node_hook(t->ex, p->timing ? node_hook : NULL, p);
    return mark(p, MARK_BEGIN, err);
}

static brisk_status between(brisk_profiler *p, int a, int b, double *ms, brisk_error *err) {
    brisk_backend *be = p->t->be;
    if (be->mark_elapsed) return be->mark_elapsed(be, a, b, ms, err);
    *ms = 1e3 * (p->host[b] - p->host[a]);
    return BRISK_OK;
}

brisk_status brisk_profile_step_end(brisk_trainer *t, brisk_error *err) {
    brisk_profiler *p = t->prof;
    brisk_exec_set_node_hook(t->ex, NULL, NULL);
    brisk_status st = mark(p, MARK_END, err);
    if (st || t->step < p->first) return st; /* a warm-up step */
    double step_ms;
    /* the last mark first: on a device that waits for the whole step, once */
    if ((st = between(p, 0, p->slot - 1, &step_ms, err))) return st;
    if (!p->timing) {
        if (p->n_plain < p->cap_steps) p->plain[p->n_plain++] = step_ms;
        return BRISK_OK;
    }
    if (p->n_marked >= p->cap_steps) return BRISK_OK;
    double *row = p->node_ms + (size_t)p->n_marked * (size_t)p->width;
    for (int i = 0; i + 1 < p->slot; i++) {
        double ms;
        if ((st = between(p, i, i + 1, &ms, err))) return st;
        int id = p->mark_id[i];
        if (id >= 0) row[id] += ms, p->node_calls[id]++;
        else row[p->width - (id == MARK_BEGIN ? 2 : 1)] += ms;
    }
    p->marked[p->n_marked++] = step_ms;
    return BRISK_OK;
}

/* KEEP times the median of v[0, n) (v unchanged): the slowest step the tables average */
#define KEEP 1.5
static double kept_cut(const double *v, int n) {
    double *sorted = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!sorted || n == 0) {
        free(sorted);
        return NAN;
    }
    memcpy(sorted, v, sizeof(double) * (size_t)n);
    const double cut = KEEP * brisk_median(sorted, n);
    free(sorted);
    return cut;
}

/* the mean of the steps within KEEP times their median (the ones the tables average) */
static double kept_mean(const double *v, int n) {
    const double cut = kept_cut(v, n);
    if (isnan(cut)) return NAN;
    double sum = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (v[i] <= cut) sum += v[i], k++;
    return sum / k;
}

static int cmp_op(const void *a, const void *b) {
    double x = ((const brisk_profile_op *)a)->ms_per_step, y = ((const brisk_profile_op *)b)->ms_per_step;
    return (x < y) - (x > y);
}

static int cmp_node(const void *a, const void *b) {
    double x = ((const brisk_profile_node *)a)->ms_per_step, y = ((const brisk_profile_node *)b)->ms_per_step;
    return (x < y) - (x > y);
}

/* The per-node means over the kept steps into the result's tables. A timed step that took
 * more than KEEP times the median timed step is left out: on a loaded machine the host (or,
 * eagerly, the device waiting on it) was descheduled within it, and one such step would
 * dominate the means. */
static brisk_status tabulate(const brisk_profiler *p, brisk_profile_result *r, brisk_error *err) {
    const brisk_trainer *t = p->t;
    const brisk_graph *g = t->g;
    const int w = p->width;
    double *sum = calloc((size_t)w, sizeof *sum);
    if (!sum) return brisk_errorf(err, BRISK_ERR_NOMEM, "profile: out of memory");
    const double cut = kept_cut(p->marked, p->n_marked);
    for (int s = 0; s < p->n_marked; s++) {
        if (p->marked[s] > cut) continue;
        r->steps_kept++;
        for (int i = 0; i < w; i++) sum[i] += p->node_ms[(size_t)s * (size_t)w + (size_t)i];
    }
    const double n = r->steps, kept = r->steps_kept; /* at least the median step */
    int used = 0;
    for (int i = 0; i < g->n_nodes; i++) used += p->node_calls[i] > 0;
    r->nodes = calloc((size_t)used + 1, sizeof *r->nodes);
    r->ops = calloc((size_t)BRISK_OP_COUNT + 2, sizeof *r->ops);
    if (!r->nodes || !r->ops) {
        free(sum);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "profile: out of memory");
    }
    int op_at[BRISK_OP_COUNT];
    for (int k = 0; k < BRISK_OP_COUNT; k++) op_at[k] = -1;
    r->ops[0] = (brisk_profile_op){"(batch in)", t->cfg.train.accumulate, sum[w - 2] / kept, 0};
    r->ops[1] = (brisk_profile_op){"(loss + update)", t->cfg.train.accumulate, sum[w - 1] / kept, 0};
    r->n_ops = 2;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!p->node_calls[i]) continue;
        const brisk_node *nd = &g->nodes[i];
        brisk_profile_node *o = &r->nodes[r->n_nodes++];
        o->id = i;
        o->calls_per_step = (int)lround(p->node_calls[i] / n);
        o->ms_per_step = sum[i] / kept;
        o->gflop_per_step = 1e-9 * brisk_node_flops(g, i) * o->calls_per_step;
        snprintf(o->op, sizeof o->op, "%s", brisk_op_name(nd->op));
        char b[BRISK_SHAPE_STR];
        snprintf(o->shape, sizeof o->shape, "%s", brisk_shape_str(&nd->shape, b, sizeof b));
        snprintf(o->dtype, sizeof o->dtype, "%s", brisk_dtype_name(nd->dtype));
        if (t->be->note) t->be->note(t->be, g, i, o->note, sizeof o->note);
        int k = (unsigned)nd->op < BRISK_OP_COUNT ? (int)nd->op : -1;
        if (k < 0) continue;
        if (op_at[k] < 0) {
            op_at[k] = r->n_ops++;
            snprintf(r->ops[op_at[k]].op, sizeof r->ops[0].op, "%s", o->op);
        }
        r->ops[op_at[k]].calls_per_step += p->node_calls[i] / n;
        r->ops[op_at[k]].ms_per_step += o->ms_per_step;
        r->ops[op_at[k]].gflop_per_step += o->gflop_per_step;
        r->nodes_per_step += o->calls_per_step;
    }
    free(sum);
    qsort(r->ops, (size_t)r->n_ops, sizeof *r->ops, cmp_op);
    qsort(r->nodes, (size_t)r->n_nodes, sizeof *r->nodes, cmp_node);
    return BRISK_OK;
}

/* The captured step replayed back to back between two device marks, after a few untimed
 * replays: no input copy, loss read or host work between the steps, so its time is what the
 * device needs for a step's kernels. The run is over, so the updates these replays make to
 * the weights are never seen. */
#define REPLAYS 50
static void replay_time(brisk_trainer *t, int program, brisk_profile_result *r) {
    brisk_backend *be = t->be;
    brisk_error e = {0};
    brisk_status st = BRISK_OK;
    double ms = NAN;
    if (program < 0 || !be->replay || !be->mark || !be->mark_elapsed || t->cfg.train.accumulate != 1) return;
    for (int i = 0; i < 5 && !st; i++) st = be->replay(be, program, &e);
    if (!st) st = be->mark(be, 0, &e);
    for (int i = 0; i < REPLAYS && !st; i++) st = be->replay(be, program, &e);
    if (!st) st = be->mark(be, 1, &e);
    if (!st) st = be->mark_elapsed(be, 0, 1, &ms, &e);
    if (st) brisk_log(&t->log, BRISK_LOG_WARN, "profile: no replayed step time: %s", e.msg);
    else r->replay_ms = ms / REPLAYS;
}

/* the kernels a step launches, the launch floor for as many, and the captured step's own
 * replay; what fails is only noted */
static void launch_floor(brisk_trainer *t, brisk_profile_result *r) {
    brisk_error e = {0};
    int program = -1;
    if (brisk_step_capture_kernels(t, &r->kernel_nodes, &program, &e)) {
        brisk_log(&t->log, BRISK_LOG_WARN, "profile: no kernel count: %s", e.msg);
        r->kernel_nodes = -1;
        return;
    }
    if (r->kernel_nodes > 0 && brisk_cuda_launch_floor(t->be, r->kernel_nodes, &r->floor_ms, &e)) {
        brisk_log(&t->log, BRISK_LOG_WARN, "profile: no launch floor: %s", e.msg);
        r->floor_ms = NAN;
    }
    replay_time(t, program, r);
}

static void profiler_free(brisk_profiler *p) {
    free(p->mark_id), free(p->host), free(p->node_ms), free(p->node_calls), free(p->marked), free(p->plain);
}

brisk_status brisk_profile_run(const brisk_config *cfg, const brisk_logger *log, const brisk_profile_options *o,
                               brisk_profile_result *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    out->kernel_nodes = -1;
    out->floor_ms = NAN;
    out->replay_ms = NAN;
    if (o->steps < 1 || o->warmup < 0 || o->steps > 100000 || o->warmup > 100000)
        return brisk_errorf(err, BRISK_ERR_INVALID, "profile: %d steps after %d warm-up steps; expected 1 to 100000 "
                            "steps and 0 to 100000 warm-up steps", o->steps, o->warmup);
    /* a pipeline: the named model's own config (brisk_pipeline_config), else the caller's;
     * the trainer reads its own copy, and this one only changes scalars */
    brisk_config c = *cfg, sub = {0};
    if (cfg->n_models > 0 || o->model) {
        int m = -1;
        char names[BRISK_MAX_MODELS * 34] = "";
        for (int i = 0; i < cfg->n_models; i++) {
            if (o->model && strcmp(cfg->model_names[i], o->model) == 0) m = i;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", cfg->model_names[i]);
        }
        if (!cfg->n_models)
            return brisk_errorf(err, BRISK_ERR_INVALID, "profile: %s has one model; a model name is for a config with "
                                "\"models\"", cfg->path);
        if (m < 0)
            return brisk_errorf(err, BRISK_ERR_INVALID,
                                "profile: %s is a pipeline; name one of its models with --model: %s%s%s%s", cfg->path,
                                names, o->model ? " (not '" : "", o->model ? o->model : "", o->model ? "')" : "");
        brisk_status st = brisk_pipeline_config(cfg, m, &sub, err);
        if (st) return st;
        c = sub;
    }
    c.train.max_steps = (int64_t)o->warmup + 2 * (int64_t)o->steps;
    c.train.out_dir[0] = 0;   /* no run directory, no checkpoints */
    c.train.log_every = 1 << 30;
    c.speed.cuda_graph = 0;   /* every node runs, and is timed, on its own */
    brisk_trainer *t = NULL;
    brisk_status st = brisk_trainer_create(&c, log, &t, err);
    brisk_config_free(&sub); /* the trainer has its own copy */
    if (st) return st;
    /* steps to time, not a run: no word on its missing run directory, and none of what a run
     * from a config's files does at its end */
    t->from_files = 0, t->no_files_told = 1;
    brisk_profiler p = {.t = t, .first = o->warmup, .cap_steps = o->steps};
    int nn = t->g->n_nodes;
    p.width = nn + 2;
    p.mark_id = malloc(sizeof(int) * BRISK_MAX_MARKS);
    p.host = malloc(sizeof(double) * BRISK_MAX_MARKS);
    p.node_ms = calloc((size_t)o->steps * (size_t)p.width, sizeof(double));
    p.node_calls = calloc((size_t)nn + 1, sizeof(int));
    p.marked = malloc(sizeof(double) * (size_t)o->steps);
    p.plain = malloc(sizeof(double) * (size_t)o->steps);
    if (!p.mark_id || !p.host || !p.node_ms || !p.node_calls || !p.marked || !p.plain) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "profile: out of memory");
        goto out;
    }
    t->prof = &p;
    brisk_run_summary sum;
    if ((st = brisk_trainer_run(t, &sum, err))) goto out;
    t->prof = NULL;
    if (p.n_marked < 1 || p.n_plain < 1) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "profile: the run stopped after %lld steps, before the timed ones "
                          "(the data has too few batches?)", (long long)t->step);
        goto out;
    }
    snprintf(out->device, sizeof out->device, "%s", t->be->name);
    snprintf(out->precision, sizeof out->precision, "%s", brisk_precision_name(t->cfg.speed.precision));
    snprintf(out->clock, sizeof out->clock, "%s", t->be->mark_elapsed ? "device events" : "host clock");
    out->steps = p.n_marked;
    out->warmup = o->warmup;
    out->accumulate = t->cfg.train.accumulate;
    if ((st = tabulate(&p, out, err))) goto out;
    out->marked_ms = kept_mean(p.marked, p.n_marked);
    out->plain_ms = kept_mean(p.plain, p.n_plain);
    launch_floor(t, out);
out:
    if (t) t->prof = NULL;
    profiler_free(&p);
    brisk_trainer_free(t);
    if (st) brisk_profile_result_free(out);
    return st;
}

void brisk_profile_result_free(brisk_profile_result *r) {
    if (!r) return;
    free(r->ops);
    free(r->nodes);
    r->ops = NULL, r->nodes = NULL;
    r->n_ops = r->n_nodes = 0;
}
