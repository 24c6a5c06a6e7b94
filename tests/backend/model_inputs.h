/* One batch for a model graph's input fields, the same in every test that compares runs of
 * it (fused/unfused, thread counts): Philox normals, class ids 0..2 for integer fields.
 * The caller frees data[f] for f < n_fields. */
#ifndef BRISK_TEST_MODEL_INPUTS_H
#define BRISK_TEST_MODEL_INPUTS_H

#include "brisk/brisk.h"

#include <stdint.h>
#include <stdlib.h>

static inline void model_inputs(const brisk_graph *g, const brisk_model_io *io, void **data) {
    uint32_t key[2] = {3, 0};
    for (int f = 0; f < io->n_fields; f++) {
        const brisk_input_info *in = &g->inputs[io->input_node[f]];
        int64_t n = brisk_shape_numel(&in->shape);
        data[f] = malloc(in->bytes);
        for (int64_t i = 0; i < n; i += 4) {
            uint32_t ctr[4] = {(uint32_t)(i / 4), (uint32_t)f, 0, 0}, u[4];
            float nv[4];
            brisk_philox4x32(ctr, key, u);
            brisk_philox_normal4(ctr, key, nv);
            for (int k = 0; k < 4 && i + k < n; k++) {
                if (in->dtype == BRISK_I32) ((int32_t *)data[f])[i + k] = (int32_t)(u[k] % 3);
                else ((float *)data[f])[i + k] = nv[k];
            }
        }
    }
}

#endif
