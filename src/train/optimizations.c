/* The optimizations a run has on, and why any is off, as data: rundir.c writes the list
 * into metrics.jsonl's run_start line and the run report (report_run.c) shows it as a
 * table. A GPU run takes the backend's own description (GEMM precision, fusion,
 * autotune, determinism) apart at its "; " separators; a CPU run lists the GPU's
 * optimizations as off, with the reason the GPU was not used, and its own fusions. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "brisk/system.h"
#include "train/trainer_internal.h"

static void item(cJSON *list, const char *name, const char *state, const char *detail) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "state", state);
    cJSON_AddStringToObject(o, "detail", detail);
    cJSON_AddItemToArray(list, o);
}

static void backend_row(void *list, const char *name, const char *state, const char *detail) {
    item(list, name, state, detail);
}

/* "epilogue fusion on (12 GEMMs)" -> name "epilogue fusion", state "on", detail "12 GEMMs";
 * "GEMM bf16 operands, ..." -> "GEMM", "info", the rest; "x: 3" -> "x", "info", "3". */
static void described_item(cJSON *list, const char *part) {
    char name[160], detail[1400];
    const char *state = "info";
    const char *cut = NULL, *rest = NULL;
    for (const char *p = part; (p = strchr(p, ' ')); p++) {
        int on = strncmp(p, " on", 3) == 0 && (p[3] == 0 || p[3] == ' ' || p[3] == ',');
        int off = strncmp(p, " off", 4) == 0 && (p[4] == 0 || p[4] == ' ' || p[4] == ',');
        if (on || off) {
            cut = p, state = on ? "on" : "off", rest = p + (on ? 3 : 4);
            break;
        }
    }
    if (!cut && (cut = strstr(part, ": "))) rest = cut + 2;
    if (!cut && strncmp(part, "GEMM ", 5) == 0) cut = part + 4, rest = part + 5;
    if (!cut) {
        item(list, part, "info", "");
        return;
    }
    snprintf(name, sizeof name, "%.*s", (int)(cut - part < 150 ? cut - part : 150), part);
    while (*rest == ' ' || *rest == ',' || *rest == '(') rest++;
    snprintf(detail, sizeof detail, "%s", rest);
    size_t n = strlen(detail);
    if (n && detail[n - 1] == ')' && !strchr(detail, '(')) detail[n - 1] = 0;
    item(list, name, state, detail);
}

cJSON *brisk_trainer_optimizations(const brisk_trainer *t) {
    const brisk_config *cfg = &t->cfg;
    cJSON *list = cJSON_CreateArray();
    if (!list) return NULL;
    char buf[2048];
    const char *opt = cfg->optim.kind == BRISK_OPTIM_ADAMW ? "AdamW" : "SGD";
    if (t->be->describe) {
        t->be->describe(t->be, buf, sizeof buf);
        char *save = NULL;
        int first = 1;
        for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save), first = 0) {
            while (*part == ' ') part++;
            if (first) item(list, "device", "info", part);
            else described_item(list, part);
        }
        item(list, "CUDA graph", cfg->speed.cuda_graph ? "on" : "off",
             cfg->speed.cuda_graph ? "the whole step captured after one eager warm-up step, then replayed"
                                   : "speed.cuda_graph is false (--no-graph): each step launched eagerly");
    } else {
        char why[700];
        if (t->device_note[0]) {
            snprintf(why, sizeof why, "%s", t->device_note);
        } else if (cfg->speed.device == BRISK_DEVICE_CPU) {
            snprintf(why, sizeof why, "speed.device is cpu (--device cpu)");
        } else {
            brisk_system_info si;
            brisk_system_probe(&si);
            snprintf(why, sizeof why, "no GPU: %s", si.gpu_usable ? "the CPU backend was chosen" : si.gpu_reason);
        }
        item(list, "device", "info", "CPU, fp32");
        item(list, "CUDA graph, mixed precision, fused epilogues, autotune", "off", why);
        if (t->be->optimizations) t->be->optimizations(t->be, backend_row, list);
    }
    if (cfg->speed.prefetch > 0) {
        snprintf(buf, sizeof buf, "%d batches ahead on a loader thread%s", cfg->speed.prefetch,
                 t->be->host_alloc ? ", into pinned memory, copied on their own stream" : "");
        item(list, "loader prefetch", "on", buf);
    } else {
        item(list, "loader prefetch", "off", "speed.prefetch is 0 (--no-prefetch): each batch loaded when needed");
    }
    snprintf(buf, sizeof buf, "%s over one parameter arena, one update for all parameters", opt);
    item(list, "fused optimizer", "on", buf);
    if (cfg->train.accumulate > 1) {
        snprintf(buf, sizeof buf, "%d micro-batches per optimizer step, gradients averaged", cfg->train.accumulate);
        item(list, "gradient accumulation", "on", buf);
    } else {
        item(list, "gradient accumulation", "off", "train.accumulate is 1");
    }
    if (cfg->optim.clip_norm > 0) {
        snprintf(buf, sizeof buf, "global norm %g", cfg->optim.clip_norm);
        item(list, "gradient clipping", "on", buf);
    } else {
        item(list, "gradient clipping", "off", "optim.clip_norm is 0");
    }
    if (cfg->model.recompute) item(list, "activation recomputation", "on", "model.recompute: less memory, more compute");
    return list;
}
