/* Image files a run left out (data.images.on_error "skip"): those found unusable at load
 * and those whose pixels failed to decode during the run (replaced in their batches by the
 * next image that decodes, data.h), in the training labels and in a validation file. Each
 * is named once in the log (the load's by setup.c, as it loads), written to metrics.jsonl as
 * a "data_skipped" record (which `brisk report` lists), and counted in the run's summary. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "train/trainer_internal.h"

static void note(brisk_trainer *t, const brisk_dataset *ds, int64_t *noted, const char *which) {
    for (int64_t n = brisk_image_dataset_skips(ds); *noted < n; ++*noted) {
        int64_t sample = -1;
        const char *file = NULL, *msg = brisk_image_dataset_skip(ds, *noted, &sample, &file);
        if (!msg) continue;
        if (sample >= 0)
            brisk_log(&t->log, BRISK_LOG_WARN, "data      %simage left out (found by step %lld), replaced in its batches "
                      "by the next one that decodes: %s", which[0] == 'v' ? "validation file's " : "", (long long)t->step, msg);
        cJSON *o = t->metrics ? cJSON_CreateObject() : NULL;
        if (!o) continue;
        cJSON_AddStringToObject(o, "event", "data_skipped");
        cJSON_AddNumberToObject(o, "step", (double)t->step);
        cJSON_AddStringToObject(o, "data", which);
        cJSON_AddStringToObject(o, "when", sample >= 0 ? "run" : "load");
        cJSON_AddStringToObject(o, "file", file ? file : "");
        cJSON_AddStringToObject(o, "reason", msg);
        char *line = cJSON_PrintUnformatted(o);
        if (line) brisk_metrics_file_put(t->metrics, line);
        free(line);
        cJSON_Delete(o);
    }
}

void brisk_trainer_note_skips(brisk_trainer *t) {
    note(t, &t->data, &t->skips_noted[0], "training");
    note(t, &t->val_data, &t->skips_noted[1], "validation");
}

void brisk_trainer_skips_summary(brisk_trainer *t, brisk_run_summary *sum) {
    brisk_trainer_note_skips(t);
    const brisk_dataset *sets[2] = {&t->data, &t->val_data};
    for (int d = 0; d < 2; d++)
        for (int64_t i = 0, n = brisk_image_dataset_skips(sets[d]); i < n; i++) {
            int64_t sample = -1;
            brisk_image_dataset_skip(sets[d], i, &sample, NULL);
            if (sample >= 0) sum->images_replaced++;
            else sum->images_left_out++;
        }
    if (sum->images_left_out || sum->images_replaced)
        brisk_log(&t->log, BRISK_LOG_INFO, "  images skipped    %lld: %lld unusable at load, %lld whose pixels failed to "
                  "decode during the run (replaced in their batches by the next that decodes); each named above and "
                  "in metrics.jsonl (data_skipped)", (long long)(sum->images_left_out + sum->images_replaced),
                  (long long)sum->images_left_out, (long long)sum->images_replaced);
}
