/* brisk predict CKPT --input X --output Y */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk predict CKPT --input X --output Y [--on-error skip|error]\n"
    "\n"
    "Runs the model of a checkpoint (trained on any device) on the CPU over the samples of X:\n"
    "an .npy [N, inputs] (sequence models: [N, seq_len, inputs]; [N, inputs, 1] and, for one\n"
    "input, [N] are taken as [N, inputs]), any numeric dtype; an .npz with the member the model\n"
    "was trained on (data.fields.x, else \"x\"), or the only member; or a .csv with the\n"
    "columns it was trained on (data.fields.x, ranges included). A model trained on windows\n"
    "also takes the raw series (a .csv or .npz with the feature columns by name, or an .npy\n"
    "[rows, features]) and predicts for every window, the k-th ending at row k + seq_len - 1;\n"
    "the normalisation fitted in training is applied to raw input either way.\n"
    "A model trained on images (data.images) also takes a folder X: its .png, .jpg and .jpeg\n"
    "files, sorted by name, decoded and normalised as its validation images were (EXIF\n"
    "orientation as in training), a batch at a time; a resnet's keypoints are then written in\n"
    "pixels of each image: .csv `file,x0,y0,x1,y1,...`, or .npy [N, K, 2]. A file that cannot\n"
    "be read is skipped with a line naming it and has no row (--on-error skip, the default);\n"
    "--on-error error stops at the first one instead.\n"
    "A meshgnn takes samples [N, grid nodes, inputs] already normalised (as brisk rollout builds\n"
    "them) and writes the change over the lead [N, grid nodes, outputs] in the fields' units; a\n"
    "meshgnn trained on data.netcdf reads the grid of its training files again (the graph).\n"
    "Y is [N, outputs] float32: class probabilities for classifiers, outputs for regressors (in\n"
    "the target's units: a windowed target learnt normalised is mapped back), written by its\n"
    "extension: .npy, or .csv (a header p0, p1, ... or y0, y1, ...). A regular file is replaced\n"
    "atomically (through a symlink, its target); a device or FIFO is written in place; - writes\n"
    ".npy to standard output.\n";

int cmd_predict(int argc, char **argv) {
    static const cli_opt opts[] = {{"--input", 1}, {"--output", 1}, {"--on-error", 1}, {NULL, 0}};
    cli_parser p = {"predict", opts, argc, argv, 0, 0};
    const char *ckpt = NULL, *in = NULL, *out = NULL, *name, *v;
    brisk_predict_options po = {0};
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == 0) in = v;
        else if (k == 1) out = v;
        else if (k == 2 && strcmp(v, "skip") && strcmp(v, "error"))
            return cli_usage("predict", "--on-error '%s': expected skip or error", v);
        else if (k == 2) po.strict_images = strcmp(v, "error") == 0;
        else if (!ckpt) ckpt = v;
        else return cli_usage("predict", "one checkpoint expected, got '%s' and '%s'", ckpt, v);
    }
    if (!ckpt || !in || !out)
        return cli_usage("predict", "%s is required", !ckpt ? "a checkpoint" : !in ? "--input" : "--output");
    brisk_error err = {0};
    /* With the output on standard output the progress line goes to stderr. */
    brisk_logger lg = cli_logger(strcmp(out, "-") == 0);
    if (cli_make_folders(out)) return 1;
    if (brisk_predict_file_with(ckpt, in, out, &po, &lg, &err)) return cli_fail_err(&err);
    return 0;
}
