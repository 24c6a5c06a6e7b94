/* brisk sample CKPT --coarse C.npy --output F.npy [--members K] [--truth T.npy] ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk sample CKPT --coarse C.npy --output F.npy [options]\n"
    "\n"
    "Samples fine fields from a trained diffusion model, conditioned on the coarse fields C\n"
    "([N, coarse]; or an .npz's member coarse, as brisk synth diffusion writes). F is\n"
    "[N, fine] float32, or [K, N, fine] with --members K > 1.\n"
    "  --members K        ensemble members per coarse row (seeds S, S+1, ...; default 1)\n"
    "  --method ddpm|ddim ddpm: ancestral, all noise steps (default); ddim: fewer steps, eta\n"
    "  --steps N          sampling steps (default: the model's noise steps, 50 in the examples)\n"
    "  --eta X            ddim noise, 0 (deterministic given the seed) to 1 (default 0)\n"
    "  --seed S           Philox seed of the noise (default 0)\n"
    "  --guess blocks|G.npy|none  where each chain starts: the forward process around a first\n"
    "                     guess of the fine field, sqrt(abar) G + sqrt(1 - abar) z at the first\n"
    "                     step: the coarse block values (default), or G ([N, fine]); none: pure\n"
    "                     noise z, right only for a schedule whose last noise level leaves no\n"
    "                     signal (the examples' keeps abar = 0.60 at T = 50, betas to 0.02, and\n"
    "                     from pure noise its samples score far worse than the coarse blocks;\n"
    "                     where abar is near 0 the two starts are the same)\n"
    "  --truth T.npy      the true fine fields [N, fine] (or an .npz's member fine): prints the\n"
    "                     RMSE of the members and of the ensemble mean, the ensemble spread and\n"
    "                     the RMSE of the coarse block values (the baseline to beat)\n"
    "  --threads N        CPU threads (0: all cores)\n";

int cmd_sample(int argc, char **argv) {
    const char *ckpt = NULL, *coarse = NULL, *out = NULL, *truth = NULL, *guess = "blocks";
    brisk_sample_params p = {BRISK_SAMPLER_DDPM, 0, 0.0f};
    long long members = 1, seed = 0, threads = 0, steps = 0;
    static const cli_opt opts[] = {{"--coarse", 1}, {"--output", 1}, {"--truth", 1}, {"--guess", 1}, {"--method", 1},
                                   {"--eta", 1},    {"--members", 1}, {"--seed", 1},  {"--threads", 1}, {"--steps", 1},
                                   {NULL, 0}};
    cli_parser cp = {"sample", opts, argc, argv, 0, 0};
    const char *a, *v;
    for (int k; (k = cli_next(&cp, &a, &v)) != CLI_END;) {
        char *end = NULL;
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == CLI_POS) {
            if (ckpt) return cli_usage("sample", "one checkpoint expected, got '%s' and '%s'", ckpt, v);
            ckpt = v;
        } else if (k == 0) coarse = v;
        else if (k == 1) out = v;
        else if (k == 2) truth = v;
        else if (k == 3) guess = v;
        else if (k == 4) {
            if (!strcmp(v, "ddpm")) p.kind = BRISK_SAMPLER_DDPM;
            else if (!strcmp(v, "ddim")) p.kind = BRISK_SAMPLER_DDIM;
            else return cli_usage("sample", "--method '%s': expected ddpm or ddim", v);
        } else if (k == 5) {
            p.eta = strtof(v, &end);
            if (*end || end == v || !(p.eta >= 0 && p.eta <= 1))
                return cli_usage("sample", "--eta '%s': expected a number in [0, 1]", v);
        } else {
            long long *dst = k == 6 ? &members : k == 7 ? &seed : k == 8 ? &threads : &steps;
            if (cli_parse_count("sample", a, v, k == 6 ? 1 : 0, 1000000, dst)) return BRISK_EXIT_USAGE;
        }
    }
    if (!ckpt || !coarse || !out)
        return cli_usage("sample", "%s is required", !ckpt ? "a checkpoint" : !coarse ? "--coarse" : "--output");
    p.steps = (int)steps;
    if (strcmp(guess, "none") == 0) guess = NULL;
    brisk_error err = {0};
    brisk_logger lg = cli_logger(strcmp(out, "-") == 0);
    if (cli_make_folders(out)) return 1;
    if (brisk_sample_file(ckpt, coarse, out, truth, guess, &p, (int)members, (uint64_t)seed, (int)threads, &lg, NULL, &err))
        return cli_fail_err(&err);
    return 0;
}
