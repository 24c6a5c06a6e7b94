/* brisk synth KIND PATH: the example data sets, generated (no downloads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cmd_synth(int argc, char **argv) {
    const char *kind = NULL, *path = NULL;
    long long n = 0, seed = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            puts("usage: brisk synth diffusion|tabular|series|images PATH [--samples N] [--seed S]\n\n"
                 "Writes an example data set with learnable structure as .npz (or, for series, .csv\n"
                 "when PATH ends in .csv):\n"
                 "  diffusion  coarse [N, 7] and fine [N, 256] fields (default N 4800)\n"
                 "  tabular    x [N, 64] features and y [N] labels in {0, 1, 2} (default N 20480)\n"
                 "  series     N rows of a price (close) and 32 multi-timeframe feature columns whose\n"
                 "             future moves are partly predictable (default N 30000)\n"
                 "  images     PATH is a folder: N 64 x 64 RGB PNG files of a filled quadrilateral in 3\n"
                 "             categories, and labels.csv (file,category,x0,y0,v0,...,x3,y3,v3) with its 4\n"
                 "             corners as keypoints (flip pairs 0-1, 2-3) (default N 512)");
            return 0;
        }
        if (!strcmp(argv[i], "--samples") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = atoll(argv[++i]);
        else if (argv[i][0] == '-') return cli_fail("synth: unknown option '%s' (see brisk synth --help)", argv[i]);
        else if (!kind) kind = argv[i];
        else if (!path) path = argv[i];
        else return cli_fail("synth: unexpected argument '%s'", argv[i]);
    }
    if (!kind || !path)
        return cli_fail("synth: usage: brisk synth diffusion|tabular|series|images PATH [--samples N] [--seed S]");
    int images = strcmp(kind, "images") == 0;
    if (n <= 0) n = strcmp(kind, "diffusion") == 0 ? 4800 : strcmp(kind, "series") == 0 ? 30000 : images ? 512 : 20480;
    if (seed < 0) return cli_fail("synth: --seed must be >= 0");
    brisk_error err = {0};
    if (images) {
        if (brisk_synth_images(path, n, (uint64_t)seed, &err)) return cli_fail_err(&err);
        printf("wrote %s: %lld PNG images and labels.csv\n", path, n);
        return 0;
    }
    if (brisk_synth_write(kind, path, n, (uint64_t)seed, &err)) return cli_fail_err(&err);
    printf("wrote %s: %lld %s samples\n", path, n, kind);
    return 0;
}
