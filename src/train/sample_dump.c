/* BRISK_DEBUG_SAMPLES=PREFIX: every rank appends to PREFIX.rank<r> one line "epoch row" per
 * sample it trains on, row being the sample's row in data.train (this rank's first row added
 * under data.shard_files), so a test can check that an epoch covers every row once across the
 * ranks. The epoch's order is recomputed from (seed, epoch) with the loader's function, and
 * the rank's samples taken at the loader's offset in it. Episodes are not dumped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

brisk_status brisk_sample_dump(brisk_trainer *t, const brisk_batch *b, brisk_error *err) {
    const char *prefix = getenv("BRISK_DEBUG_SAMPLES");
    if (!prefix || !prefix[0] || t->episodes.k > 0) return BRISK_OK;
    int64_t n = t->split.ntrain, B = t->cfg.train.batch_size;
    if (!t->dump) {
        char path[BRISK_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s.rank%d", prefix, t->rank);
        if (!(t->dump = fopen(path, "a")))
            return brisk_errorf(err, BRISK_ERR_IO, "BRISK_DEBUG_SAMPLES: cannot open %s: %s", path, strerror(errno));
        if (!(t->dump_order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1))))
            return brisk_errorf(err, BRISK_ERR_NOMEM, "BRISK_DEBUG_SAMPLES: out of memory");
        t->dump_epoch = -1;
    }
    if (t->dump_epoch != b->epoch) {
        brisk_status st = brisk_sampler_order(t->split.train, n, t->cfg.train.seed, (uint64_t)b->epoch,
                                              t->cfg.data.shuffle, t->dump_order, err);
        if (st) return st;
        t->dump_epoch = b->epoch;
    }
    int64_t at = b->position + (t->data_shards > 1 ? B * t->rank : 0);
    for (int64_t j = 0; j < B && at + j < n; j++)
        fprintf(t->dump, "%lld %lld\n", (long long)b->epoch, (long long)(t->dump_order[at + j] + t->shard_lo));
    return BRISK_OK;
}

void brisk_sample_dump_close(brisk_trainer *t) {
    if (t->dump) fclose(t->dump);
    free(t->dump_order);
    t->dump = NULL, t->dump_order = NULL;
}
