/* brisk profile's result as text and as JSON (the run itself is profile.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "brisk/train.h"

/* GFLOP/s of a row's products, "-" for a row without any (memory-bound ops) */
static const char *rate(double gflop, double ms, char *buf, size_t size) {
    if (gflop > 0 && ms > 0) snprintf(buf, size, "%.1f", gflop / (1e-3 * ms));
    else snprintf(buf, size, "-");
    return buf;
}

static double total_ms(const brisk_profile_result *r) {
    double s = 0;
    for (int i = 0; i < r->n_ops; i++) s += r->ops[i].ms_per_step;
    return s;
}

void brisk_profile_print(FILE *f, const char *config, const brisk_profile_result *r, int top) {
    const double sum = total_ms(r);
    fprintf(f, "brisk profile %s: %s, precision %s, %d timed steps (and %d plain) after %d warm-up, eager; %s\n",
            config, r->device, r->precision, r->steps, r->steps, r->warmup, r->clock);
    if (r->steps_kept < r->steps)
        fprintf(f, "(the tables average %d of the %d timed steps: the others took over 1.5x their median)\n",
                r->steps_kept, r->steps);
    char g[32];
    fprintf(f, "\nper op type (per step)\n%-28s %8s %12s %8s %12s %9s\n", "op", "calls", "ms", "share", "us/call",
            "GFLOP/s");
    for (int i = 0; i < r->n_ops; i++) {
        const brisk_profile_op *o = &r->ops[i];
        fprintf(f, "%-28s %8.1f %12.4f %7.1f%% %12.2f %9s\n", o->op, o->calls_per_step, o->ms_per_step,
                sum > 0 ? 100 * o->ms_per_step / sum : 0.0,
                o->calls_per_step > 0 ? 1e3 * o->ms_per_step / o->calls_per_step : 0.0,
                rate(o->gflop_per_step, o->ms_per_step, g, sizeof g));
    }
    fprintf(f, "%-28s %8s %12.4f\n", "total", "", sum);
    int k = top < r->n_nodes ? top : r->n_nodes;
    fprintf(f, "\ntop %d nodes (per step)\n%6s %-22s %-8s %-28s %10s %7s %9s  %s\n", k, "node", "op", "dtype", "shape",
            "ms", "share", "GFLOP/s", "how");
    for (int i = 0; i < k; i++) {
        const brisk_profile_node *n = &r->nodes[i];
        char calls[24] = "";
        if (n->calls_per_step > 1) snprintf(calls, sizeof calls, "(%d runs) ", n->calls_per_step);
        fprintf(f, "%6d %-22s %-8s %-28s %10.4f %6.1f%% %9s  %s%s\n", n->id, n->op, n->dtype, n->shape,
                n->ms_per_step, sum > 0 ? 100 * n->ms_per_step / sum : 0.0,
                rate(n->gflop_per_step, n->ms_per_step, g, sizeof g), calls, n->note);
    }
    fprintf(f, "\nstep            timed %.4f ms (sum of the rows %.4f), plain eager %.4f ms: the marks cost %+.1f%%\n",
            r->marked_ms, sum, r->plain_ms, r->plain_ms > 0 ? 100 * (r->marked_ms / r->plain_ms - 1) : 0.0);
    fprintf(f, "node runs       %d a step", r->nodes_per_step);
    if (r->kernel_nodes >= 0) fprintf(f, "; kernels %d a step (a captured step's CUDA graph nodes)", r->kernel_nodes);
    fprintf(f, "\n");
    if (isfinite(r->floor_ms))
        fprintf(f, "launch floor    %.4f ms: an empty CUDA graph of %d kernels replayed; the plain step is %.2fx "
                "that\n", r->floor_ms, r->kernel_nodes, r->floor_ms > 0 ? r->plain_ms / r->floor_ms : 0.0);
    else
        fprintf(f, "launch floor    - (no CUDA device)\n");
    if (isfinite(r->replay_ms)) {
        char vs[64] = "";
        if (isfinite(r->floor_ms) && r->floor_ms > 0)
            snprintf(vs, sizeof vs, "; %.2fx the launch floor", r->replay_ms / r->floor_ms);
        fprintf(f, "replayed step   %.4f ms: the captured step's own CUDA graph replayed back to back, nothing issued "
                "between (the device's time for a step's kernels)%s\n", r->replay_ms, vs);
    }
}

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *brisk_profile_json(const char *config, const brisk_profile_result *r, int top) {
    cJSON *j = cJSON_CreateObject(), *ops = cJSON_CreateArray(), *nodes = cJSON_CreateArray();
    if (!j || !ops || !nodes) {
        cJSON_Delete(j), cJSON_Delete(ops), cJSON_Delete(nodes);
        return NULL;
    }
    const double sum = total_ms(r);
    cJSON_AddStringToObject(j, "config", config);
    cJSON_AddStringToObject(j, "device", r->device);
    cJSON_AddStringToObject(j, "precision", r->precision);
    cJSON_AddStringToObject(j, "clock", r->clock);
    cJSON_AddNumberToObject(j, "steps", r->steps);
    cJSON_AddNumberToObject(j, "steps_kept", r->steps_kept);
    cJSON_AddNumberToObject(j, "warmup", r->warmup);
    cJSON_AddNumberToObject(j, "accumulate", r->accumulate);
    cJSON_AddItemToObject(j, "step_ms_timed", num(r->marked_ms));
    cJSON_AddItemToObject(j, "step_ms_plain", num(r->plain_ms));
    cJSON_AddItemToObject(j, "rows_ms", num(sum));
    cJSON_AddNumberToObject(j, "node_runs_per_step", r->nodes_per_step);
    cJSON_AddNumberToObject(j, "kernel_nodes", r->kernel_nodes);
    cJSON_AddItemToObject(j, "launch_floor_ms", num(r->floor_ms));
    cJSON_AddItemToObject(j, "replayed_step_ms", num(r->replay_ms));
    for (int i = 0; i < r->n_ops; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddStringToObject(o, "op", r->ops[i].op);
        cJSON_AddNumberToObject(o, "calls_per_step", r->ops[i].calls_per_step);
        cJSON_AddNumberToObject(o, "ms_per_step", r->ops[i].ms_per_step);
        cJSON_AddNumberToObject(o, "share", sum > 0 ? r->ops[i].ms_per_step / sum : 0.0);
        cJSON_AddNumberToObject(o, "gflop_per_step", r->ops[i].gflop_per_step);
        cJSON_AddItemToArray(ops, o);
    }
    for (int i = 0; i < r->n_nodes && i < top; i++) {
        const brisk_profile_node *n = &r->nodes[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "node", n->id);
        cJSON_AddStringToObject(o, "op", n->op);
        cJSON_AddStringToObject(o, "dtype", n->dtype);
        cJSON_AddStringToObject(o, "shape", n->shape);
        cJSON_AddNumberToObject(o, "calls_per_step", n->calls_per_step);
        cJSON_AddNumberToObject(o, "ms_per_step", n->ms_per_step);
        cJSON_AddNumberToObject(o, "gflop_per_step", n->gflop_per_step);
        cJSON_AddStringToObject(o, "how", n->note);
        cJSON_AddItemToArray(nodes, o);
    }
    cJSON_AddItemToObject(j, "ops", ops);
    cJSON_AddItemToObject(j, "top_nodes", nodes);
    return j;
}
