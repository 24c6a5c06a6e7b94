/* Buffers (BatchNorm's running statistics) in checkpoints: read back by name like
 * parameters, with AdamW moments only for the parameters (brisk_checkpoint_save writes none
 * for buffers, so reading does not ask for them), and a checkpoint lacking a buffer is
 * refused as another model's. */
#include "brisk/safetensors.h"
#include "test.h"
#include "train/trainer_internal.h"

#include <unistd.h>

static char dir[512];

static void test_buffers_round_trip(void) {
    T_MAKE_DIR(dir, "ckpt_buffers");
    brisk_graph *g = brisk_graph_new();
    int w = brisk_param(g, "bn.weight", brisk_shape1(3), BRISK_INIT_ONES, 0, 0);
    int b = brisk_buffer(g, "bn.running_mean", brisk_shape1(3), BRISK_INIT_ZEROS);
    REQUIRE(w >= 0 && b >= 0);
    float pw[3] = {1, 2, 3}, pb[3] = {-1, 0.5f, 7}, m[3] = {0.1f, 0.2f, 0.3f}, v[3] = {4, 5, 6};
    brisk_st_entry e[4] = {{"bn.weight", BRISK_F32, brisk_shape1(3), pw},
                           {"bn.running_mean", BRISK_F32, brisk_shape1(3), pb},
                           {"optim.exp_avg.bn.weight", BRISK_F32, brisk_shape1(3), m},
                           {"optim.exp_avg_sq.bn.weight", BRISK_F32, brisk_shape1(3), v}};
    char path[600];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    brisk_error err = {0};
    for (int missing = 0; missing < 2; missing++) {
        brisk_st_entry use[4];
        size_t n = 0;
        for (int i = 0; i < 4; i++)
            if (!(missing && i == 1)) use[n++] = e[i];
        REQUIRE_OK(brisk_safetensors_write(path, use, n, NULL, 0, &err), &err);
        brisk_safetensors *st = NULL;
        REQUIRE_OK(brisk_safetensors_open(path, &st, &err), &err);
        size_t nf = (size_t)g->n_param_floats;
        float *p = calloc(nf, 4), *mm = calloc(nf, 4), *vv = calloc(nf, 4);
        brisk_status s = brisk_checkpoint_read_tensors(st, g, p, mm, vv, 0, &err);
        if (!missing) {
            CHECKF(s == BRISK_OK, "%s", err.msg);
            const brisk_param_info *pi = &g->params[0], *bi = &g->params[1];
            CHECK(memcmp(p + pi->offset, pw, sizeof pw) == 0 && memcmp(p + bi->offset, pb, sizeof pb) == 0);
            CHECK(memcmp(mm + pi->offset, m, sizeof m) == 0 && memcmp(vv + pi->offset, v, sizeof v) == 0);
            CHECK(mm[bi->offset] == 0.0f && vv[bi->offset + 2] == 0.0f); /* no moments for a buffer */
        } else {
            CHECKF(s != BRISK_OK && strstr(err.msg, "bn.running_mean"), "missing buffer: %s", err.msg);
        }
        free(p), free(mm), free(vv);
        brisk_safetensors_free(st);
    }
    unlink(path);
    rmdir(dir);
    brisk_graph_free(g);
}

TEST_MAIN(T(test_buffers_round_trip))
