/* brisk synth KIND PATH: the example data sets, generated (no downloads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk synth diffusion|tabular|series|images|weather PATH [--samples N] [--seed S]\n\n"
    "Writes an example data set with learnable structure as .npz (or, for series, .csv\n"
    "when PATH ends in .csv):\n"
    "  diffusion  coarse [N, 7] and fine [N, 256] fields (default N 4800)\n"
    "  tabular    x [N, 64] features and y [N] labels in {0, 1, 2} (default N 20480)\n"
    "  series     N rows of a price (close) and 32 multi-timeframe feature columns whose\n"
    "             future moves are partly predictable (default N 30000)\n"
    "  images     PATH is a folder: N 64 x 64 RGB PNG files of a filled quadrilateral in 3\n"
    "             categories, and labels.csv (file,category,x0,y0,v0,...,x3,y3,v3) with its 4\n"
    "             corners as keypoints (flip pairs 0-1, 2-3) (default N 512)\n"
    "  weather    PATH is a NetCDF-4 file: N hourly steps of a 16 x 16 regional grid (CF\n"
    "             coordinates time, level, lat, lon): t2m, msl, t and z on 3 levels, advected\n"
    "             smooth fields with a diurnal cycle, and static orography and lsm (default N\n"
    "             1200; needs a build with libnetcdf)\n"
    "  --samples N  1 to 2^31 - 1;  --seed S  0 to 2^53\n";

int cmd_synth(int argc, char **argv) {
    static const cli_opt opts[] = {{"--samples", 1}, {"--seed", 1}, {NULL, 0}};
    cli_parser p = {"synth", opts, argc, argv, 0, 0};
    const char *kind = NULL, *path = NULL, *name, *v;
    long long n = 0, seed = 0;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == 0 && cli_parse_count("synth", name, v, 1, 2147483647LL, &n)) return BRISK_EXIT_USAGE;
        if (k == 1 && cli_parse_count("synth", name, v, 0, 9007199254740992LL, &seed)) return BRISK_EXIT_USAGE;
        if (k != CLI_POS) continue;
        if (!kind) kind = v;
        else if (!path) path = v;
        else return cli_usage("synth", "unexpected argument '%s'", v);
    }
    if (!kind || !path) return cli_usage("synth", "KIND and PATH are required");
    static const char *const kinds[] = {"diffusion", "tabular", "series", "images", "weather"};
    size_t known = 0;
    while (known < sizeof kinds / sizeof kinds[0] && strcmp(kind, kinds[known]) != 0) known++;
    if (known == sizeof kinds / sizeof kinds[0])
        return cli_usage("synth", "unknown kind '%s'; expected diffusion, tabular, series, images or weather", kind);
    int images = strcmp(kind, "images") == 0, weather = strcmp(kind, "weather") == 0;
    if (n == 0)
        n = strcmp(kind, "diffusion") == 0 ? 4800 : strcmp(kind, "series") == 0 ? 30000 : images ? 512 : weather ? 1200 : 20480;
    brisk_error err = {0};
    if (cli_make_folders(path)) return 1; /* images: the folders above PATH, which it makes itself */
    if (weather) {
        if (brisk_synth_weather(path, n, (uint64_t)seed, &err)) return cli_fail_err(&err);
        cli_note(0, "wrote %s: %lld hourly steps of a 16 x 16 grid (t2m, msl, t and z at 850/500/250 hPa; orography, lsm)",
               path, n);
        return 0;
    }
    if (images) {
        if (brisk_synth_images(path, n, (uint64_t)seed, &err)) return cli_fail_err(&err);
        cli_note(0, "wrote %s: %lld PNG images and labels.csv", path, n);
        return 0;
    }
    if (brisk_synth_write(kind, path, n, (uint64_t)seed, &err)) return cli_fail_err(&err);
    /* With the data on standard output the note goes to stderr. */
    cli_note(strcmp(path, "-") == 0, "wrote %s: %lld %s samples", path, n, kind);
    return 0;
}
