/* brisk predict CKPT --input X.npy --output Y.npy */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk predict CKPT --input X --output Y.npy\n"
    "\n"
    "Runs the model of a checkpoint (trained on any device) on the CPU over the samples of X:\n"
    "an .npy [N, inputs] (sequence models: [N, seq_len, inputs]), any numeric dtype. A model\n"
    "trained on windows also takes the raw series (a .csv or .npz with the feature columns by\n"
    "name, or an .npy [rows, features]) and predicts for every window, the k-th ending at row\n"
    "k + seq_len - 1; the normalisation fitted in training is applied to raw input either way.\n"
    "Y is [N, outputs] float32: class probabilities for classifiers, outputs for regressors (in the\n"
    "target's units: a windowed target learnt normalised is mapped back).\n";

int cmd_predict(int argc, char **argv) {
    const char *ckpt = NULL, *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { fputs(help, stdout); return 0; }
        if ((!strcmp(argv[i], "--input") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
            if (argv[i][2] == 'i') in = argv[++i];
            else out = argv[++i];
        } else if (argv[i][0] == '-') {
            return cli_fail("predict: unknown option '%s' (see brisk predict --help)", argv[i]);
        } else if (!ckpt) {
            ckpt = argv[i];
        } else {
            return cli_fail("predict: one checkpoint expected, got '%s' and '%s'", ckpt, argv[i]);
        }
    }
    if (!ckpt || !in || !out) { fputs(help, stderr); return 2; }
    brisk_error err = {0};
    brisk_logger lg = {cli_log, NULL, BRISK_LOG_INFO};
    if (brisk_predict_file(ckpt, in, out, &lg, &err)) return cli_fail_err(&err);
    return 0;
}
