/* ONNX's ops that grow images: ConvTranspose (1-D and 2-D, brisk's transposed convolution)
 * and Resize (2-D, integer factors: nearest as nn.Upsample(mode="nearest") exports it,
 * bilinear as mode="bilinear" with align_corners false), a U-Net decoder's two ways up. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

int ox_build_conv_transpose(ctx *c) {
    int x = ox_in(c, 0, 0), w = ox_in(c, 1, 0);
    if (x < 0 || w < 0) return -1;
    brisk_shape sx = *ox_shape(c, x), sw = *ox_shape(c, w);
    int rank = sx.ndim;
    if ((rank != 3 && rank != 4) || sw.ndim != rank)
        return ox_fail(c, "ConvTranspose of a rank-%d input and a rank-%d weight (1-D and 2-D taken)", rank, sw.ndim);
    const int64_t *v;
    if (ox_attr_ints(c, "output_shape", &v)) return ox_fail(c, "output_shape (pads and output_padding taken)");
    brisk_window win;
    if (ox_conv_window(c, rank - 2, &win)) return -1;
    int op[2] = {0, 0};
    size_t nop = ox_attr_ints(c, "output_padding", &v);
    for (size_t i = 0; i < nop && i < 2; i++) op[2 - (rank - 2) + (int)i] = (int)v[i];
    if (rank == 3) { /* 1-D as 2-D of height 1 (views) */
        x = brisk_reshape(c->g, x, brisk_shape4(sx.d[0], sx.d[1], 1, sx.d[2]));
        w = brisk_reshape(c->g, w, brisk_shape4(sw.d[0], sw.d[1], 1, sw.d[2]));
    }
    int y = x < 0 || w < 0 ? -1 : brisk_conv_transpose2d(c->g, x, w, win, op[0], op[1]);
    if (y >= 0 && rank == 3) {
        const brisk_shape *sy = ox_shape(c, y);
        y = brisk_reshape(c->g, y, brisk_shape3(sy->d[0], sy->d[1], sy->d[3]));
    }
    if (ox_has_in(c, 2)) y = ox_channel_add(c, y, ox_in(c, 2, 0), rank - 2);
    return y;
}


int ox_build_resize(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    brisk_shape s = *ox_shape(c, x);
    if (s.ndim != 4) return ox_fail(c, "Resize of a rank-%d input ([N, C, H, W] taken)", s.ndim);
    const char *mode = "nearest", *ct = "half_pixel", *nm = "round_prefer_floor";
    brisk_error e;
    if (brisk_onnx_attr_string(c->m, c->n, "mode", mode, &mode, &e) ||
        brisk_onnx_attr_string(c->m, c->n, "coordinate_transformation_mode", ct, &ct, &e) ||
        brisk_onnx_attr_string(c->m, c->n, "nearest_mode", nm, &nm, &e))
        return ox_fail(c, "%s", e.msg);
    int kind;
    if (!strcmp(mode, "nearest")) {
        /* out[o] = x[floor(o / s)] */
        if (strcmp(ct, "asymmetric") || strcmp(nm, "floor"))
            return ox_fail(c, "nearest with coordinate_transformation_mode %s and nearest_mode %s (asymmetric and floor "
                           "taken: nn.Upsample(mode=\"nearest\"))", ct, nm);
        kind = BRISK_UPSAMPLE_NEAREST;
    } else if (!strcmp(mode, "linear")) {
        if (strcmp(ct, "half_pixel") && strcmp(ct, "pytorch_half_pixel"))
            return ox_fail(c, "linear with coordinate_transformation_mode %s (half_pixel or pytorch_half_pixel taken: "
                           "bilinear with align_corners false)", ct);
        kind = BRISK_UPSAMPLE_BILINEAR;
    } else {
        return ox_fail(c, "mode %s (nearest and linear taken)", mode);
    }
    const int64_t *axes;
    if (ox_attr_ints(c, "axes", &axes) || ox_attr_i(c, "antialias", 0))
        return ox_fail(c, "axes or antialias (every axis, no antialiasing taken)");
    konst *o2, *o3, *sc = ox_const_in(c, 2, &o2), *sz = ox_const_in(c, 3, &o3);
    double f[4] = {0, 0, 0, 0};
    int rc = 0;
    if ((ox_has_in(c, 2) && !sc) || (ox_has_in(c, 3) && !sz))
        rc = ox_fail(c, "scales or sizes computed from tensors (constants taken)");
    else if (sc && sc->numel == 0 && !sz)
        rc = ox_fail(c, "neither scales nor sizes");
    else if (!(sc && sc->numel == 4) && !(sz && sz->numel == 4))
        rc = ox_fail(c, "scales or sizes not of 4 values");
    /* each axis's factor: sizes when given, else scales */
    for (int a = 0; !rc && a < 4; a++) f[a] = sz && sz->numel == 4 ? sz->v[a] / (double)s.d[a] : sc->v[a];
    ox_konst_free(o2), ox_konst_free(o3);
    if (rc) return -1;
    if (f[0] != 1 || f[1] != 1 || f[2] < 1 || f[3] < 1 || f[2] != floor(f[2]) || f[3] != floor(f[3]) || f[2] > 65536 ||
        f[3] > 65536)
        return ox_fail(c, "factors %g, %g, %g, %g of [N, C, H, W] (N and C kept, H and W by integer factors taken)",
                       f[0], f[1], f[2], f[3]);
    return brisk_upsample2d(c->g, x, kind, (int)f[2], (int)f[3]);
}
