/* brisk export CKPT --onnx FILE [--fp16] */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk export CKPT --onnx FILE [--fp16]\n"
    "\n"
    "Writes the inference graph of a checkpoint's model as an ONNX model (opset 17, IR version 8)\n"
    "for ONNX Runtime, TensorRT and the like: mlp, diffusion (the denoiser: inputs coarse, x_t and\n"
    "the step t (int32), output the predicted noise, or x0 with model.noise.prediction x0), lstm,\n"
    "transformer, resnet (x [N, C, H, W] normalised, keypoints [N, K, 2]) and meshgnn (its graph\n"
    "inside: Gather and ScatterND with reduction add). Inputs are named as the model's fields (x\n"
    "for all but diffusion) with the batch dimension N; the output \"output\" is what brisk predict\n"
    "writes for the same input: class probabilities for a classifier, outputs in the target's\n"
    "units for a regression, with the normalisation of windowed data inside; a meshgnn's change\n"
    "in the fields' units.\n"
    "  --onnx FILE   where to write the model (replaced atomically; - for standard output)\n"
    "  --fp16        store the weights as fp16 (half the file); the computation stays fp32\n";

int cmd_export(int argc, char **argv) {
    static const cli_opt opts[] = {{"--onnx", 1}, {"--fp16", 0}, {NULL, 0}};
    cli_parser p = {"export", opts, argc, argv, 0, 0};
    const char *ckpt = NULL, *onnx = NULL, *name, *v;
    int fp16 = 0;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == 0) onnx = v;
        else if (k == 1) fp16 = 1;
        else if (!ckpt) ckpt = v;
        else return cli_usage("export", "one checkpoint expected, got '%s' and '%s'", ckpt, v);
    }
    if (!ckpt || !onnx)
        return cli_usage("export", "%s is required", !ckpt ? "a checkpoint" : "--onnx FILE (the only format so far)");
    brisk_error err = {0};
    /* With the model on standard output the message goes to stderr. */
    brisk_logger lg = cli_logger(strcmp(onnx, "-") == 0);
    if (cli_make_folders(onnx)) return 1;
    if (brisk_export_onnx(ckpt, onnx, fp16, &lg, &err)) return cli_fail_err(&err);
    return 0;
}
