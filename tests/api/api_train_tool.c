/* For api.same_losses_as_cli: trains through the stable API on the arrays of an .npz, pushed
 * the way a simulation pushes them (80 rows per call), for the config's train.epochs, so the
 * run's metrics.jsonl can be compared with `brisk train` on the same file.
 *   api_train_tool CONFIG DATA.npz INPUT_MEMBER TARGET_MEMBER */
#include <stdio.h>
#include <stdlib.h>

#include "brisk/brisk.h"

static void log_line(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    if (level <= BRISK_LOG_WARN) fprintf(stderr, "%s\n", msg);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: api_train_tool CONFIG DATA.npz INPUT_MEMBER TARGET_MEMBER\n");
        return 2;
    }
    brisk_error err = {0};
    brisk_config cfg;
    brisk_npy_array in, tg;
    if (brisk_config_load(argv[1], NULL, 0, &cfg, &err) || brisk_npz_read_one(argv[2], argv[3], &in, &err) ||
        brisk_npz_read_one(argv[2], argv[4], &tg, &err)) {
        fprintf(stderr, "api_train_tool: %s\n", err.msg);
        return 1;
    }
    brisk_session *s = NULL;
    int64_t n = in.shape.d[0], wi = in.nbytes / 4 / n, wt = tg.nbytes / 4 / n;
    brisk_status st = brisk_session_create_file(argv[1], log_line, NULL, &s);
    for (int64_t r = 0; r < n && !st; r += 80)
        st = brisk_session_push(s, n - r < 80 ? n - r : 80, (const float *)in.data + r * wi, wi,
                                (const float *)tg.data + r * wt, wt);
    if (!st) st = brisk_session_train_epochs(s, cfg.train.epochs);
    if (st) fprintf(stderr, "api_train_tool: %s\n", brisk_session_error(s));
    brisk_session_destroy(s);
    brisk_npy_free(&in);
    brisk_npy_free(&tg);
    brisk_config_free(&cfg);
    return st ? 1 : 0;
}
