/* weights_diff A B RTOL: every F32 tensor of checkpoint A against B's of the same name;
 * ||a - b|| / ||a|| (2-norms) per tensor must not exceed RTOL (0: bit-identical). A norm,
 * not the largest element: AdamW moves a parameter whose gradient is ~0 by about lr whatever
 * the gradient's rounding, so single elements of equal runs differ by lr. Prints
 * "PASS ..." or "FAIL ..." and exits 0 or 1 (2: unreadable files). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/safetensors.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: weights_diff A.safetensors B.safetensors RTOL\n");
        return 2;
    }
    brisk_error err = {0};
    brisk_safetensors *a = NULL, *b = NULL;
    if (brisk_safetensors_open(argv[1], &a, &err) || brisk_safetensors_open(argv[2], &b, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    double rtol = atof(argv[3]), worst = 0;
    const char *worst_name = "";
    size_t n_tensors = 0;
    int missing = 0;
    for (size_t i = 0; i < brisk_safetensors_count(a); i++) {
        const brisk_st_tensor *ta = brisk_safetensors_at(a, i), *tb = brisk_safetensors_find(b, ta->name);
        if (ta->dtype != BRISK_F32) continue;
        if (!tb || tb->nbytes != ta->nbytes) {
            printf("FAIL %s: missing or of another size in %s\n", ta->name, argv[2]);
            missing = 1;
            continue;
        }
        size_t n = ta->nbytes / 4;
        float *x = malloc(ta->nbytes + 4), *y = malloc(ta->nbytes + 4);
        if (!x || !y) return 2;
        memcpy(x, ta->data, ta->nbytes);
        memcpy(y, tb->data, tb->nbytes);
        double scale = 0, d = 0;
        int differ = 0;
        for (size_t k = 0; k < n; k++) {
            double e = (double)x[k] - (double)y[k];
            scale += (double)x[k] * x[k];
            d += isnan(e) ? INFINITY : e * e;
            differ |= memcmp(&x[k], &y[k], 4) != 0;
        }
        double r = scale > 0 ? sqrt(d / scale) : sqrt(d);
        if (differ && r == 0) r = 1e-300; /* bit-identity asked: any difference fails */
        if (r > worst) worst = r, worst_name = ta->name;
        n_tensors++;
        free(x), free(y);
    }
    int ok = !missing && n_tensors > 0 && worst <= rtol;
    printf("%s %zu tensors, max rel diff %.3g%s%s\n", ok ? "PASS" : "FAIL", n_tensors, worst, worst > 0 ? " in " : "",
           worst > 0 ? worst_name : "");
    brisk_safetensors_free(a);
    brisk_safetensors_free(b);
    return ok ? 0 : 1;
}
