/* brisk inside a simulation, in C: a toy model steps forward in time; every step each of its
 * 80 columns yields a coarse field (7 values) and a fine field (256 values); the fields go into
 * a brisk session's buffer, every 48 steps (3840 samples) the diffusion denoiser trains for an
 * epoch, and at the end it samples fine fields from coarse ones. examples/fortran/online.F90 is
 * the same program in Fortran. Given MODEL.onnx (a network exported from PyTorch,
 * examples/onnx_denoiser.py: input "coarse" [7], output "fine_hat" [256]), the session trains
 * that model instead, the clean fine field its target, and the end predicts fine fields from
 * coarse ones, which must then be closer to the truth than the coarse block values.
 *
 * Built twice: plain, and with -DBRISK_EXAMPLE_MPI as an MPI program where every rank computes
 * its share of the columns and rank 0 gathers them, trains, samples and scatters the sampled
 * fields back (the "rank 0 gathers" pattern of include/brisk/api.h). brisk itself never calls
 * MPI. Exits non-zero when the loss did not decrease or a sample is not finite.
 *
 *   online [CHECKPOINT_OUT [MODEL.onnx]]          mpirun -np 2 online_mpi [CHECKPOINT_OUT [MODEL.onnx]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/api.h"
#ifdef BRISK_EXAMPLE_MPI
#include <mpi.h>
#endif

enum { COLUMNS = 80, COARSE = 7, FINE = 256, STEPS_PER_EPOCH = 48, EPOCHS = 4 };

/* The session: the workload's denoiser, predicting the clean field (x0), which samples far
 * better than noise prediction after a few epochs; a buffer of one epoch that drops the oldest. */
static const char *config =
    "{\"model\": {\"type\": \"diffusion\", \"fine\": 256, \"coarse\": 7, \"hidden\": [256, 256, 256],"
    "           \"noise\": {\"steps\": 50, \"prediction\": \"x0\"}},"
    " \"data\":  {\"validation_fraction\": 0, \"buffer\": {\"capacity\": 3840, \"when_full\": \"drop_oldest\"}},"
    " \"train\": {\"batch_size\": 16, \"seed\": 0, \"log_every\": 240},"
    " \"speed\": {\"device\": \"auto\", \"threads\": 0}}"; /* 0: OMP_NUM_THREADS */

/* An imported model's config but its file (%s: a path without quotes or backslashes): a
 * regression of the clean fine field on the coarse one, trained as the denoiser is. */
static const char *onnx_config =
    "{\"model\": {\"type\": \"onnx\", \"file\": \"%s\","
    "           \"inputs\": [{\"name\": \"coarse\", \"shape\": [7]}, {\"name\": \"fine\", \"shape\": [256]}],"
    "           \"losses\": [{\"output\": \"fine_hat\", \"target\": \"fine\", \"type\": \"mse\"}]},"
    " \"data\":  {\"validation_fraction\": 0, \"buffer\": {\"capacity\": 3840, \"when_full\": \"drop_oldest\"}},"
    " \"train\": {\"batch_size\": 16, \"seed\": 0, \"log_every\": 240},"
    " \"speed\": {\"device\": \"auto\", \"threads\": 0}}";

/* The toy simulation: column j at time step k is a smooth field of three travelling modes and a
 * small-scale wave; its coarse field is the mean over 7 blocks of the fine grid. */
static void column_fields(int j, int k, float *coarse, float *fine) {
    const double pi = 3.14159265358979, phase = 2 * pi * j / COLUMNS;
    for (int i = 0; i < FINE; i++) {
        double x = (i + 0.5) / FINE;
        double base = sin(2 * pi * x + phase + 0.05 * k) + 0.6 * sin(4 * pi * x + 2 * phase - 0.03 * k) +
                      0.3 * sin(6 * pi * x + 0.02 * k * (1 + j % 3));
        fine[i] = (float)(base + 0.2 * sin(24 * pi * x + phase + 0.1 * k) * (0.5 + 0.5 * sin(2 * pi * x)));
    }
    for (int m = 0; m < COARSE; m++) {
        double s = 0;
        int a = m * FINE / COARSE, b = (m + 1) * FINE / COARSE;
        for (int i = a; i < b; i++) s += fine[i];
        coarse[m] = (float)(s / (b - a));
    }
}

static void print_log(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    if (level <= BRISK_LOG_INFO) printf("  brisk: %s\n", msg);
}

static int fail(brisk_session *s, const char *what) {
    fprintf(stderr, "online: %s: %s\n", what, brisk_session_error(s));
    return 1;
}

int main(int argc, char **argv) {
    int rank = 0, ranks = 1;
#ifdef BRISK_EXAMPLE_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (COLUMNS % ranks) {
        if (rank == 0) fprintf(stderr, "online: %d columns do not split over %d ranks\n", COLUMNS, ranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#endif
    const int local = COLUMNS / ranks, first = rank * local;
    float *coarse = malloc(sizeof(float) * COARSE * COLUMNS), *fine = malloc(sizeof(float) * FINE * COLUMNS);
    float *sampled = malloc(sizeof(float) * FINE * COLUMNS);
    brisk_session *s = NULL;
    int bad = 0;
    double loss[EPOCHS];
    const int imported = argc > 2;
    char session_config[8192];
    snprintf(session_config, sizeof session_config, imported ? onnx_config : "%s", imported ? argv[2] : config);
    if (rank == 0 && brisk_session_create(session_config, print_log, NULL, &s) != BRISK_OK) bad = fail(s, "create");

    for (int k = 1; k <= STEPS_PER_EPOCH * EPOCHS && !bad; k++) {
        /* each rank computes its columns into its slice, then rank 0 holds all of them */
        for (int j = 0; j < local; j++)
            column_fields(first + j, k, coarse + (first + j) * COARSE, fine + (first + j) * FINE);
#ifdef BRISK_EXAMPLE_MPI
        MPI_Gather(rank ? coarse + first * COARSE : MPI_IN_PLACE, local * COARSE, MPI_FLOAT, coarse, local * COARSE,
                   MPI_FLOAT, 0, MPI_COMM_WORLD);
        MPI_Gather(rank ? fine + first * FINE : MPI_IN_PLACE, local * FINE, MPI_FLOAT, fine, local * FINE, MPI_FLOAT, 0,
                   MPI_COMM_WORLD);
#endif
        if (rank != 0) continue;
        if (brisk_session_push(s, COLUMNS, coarse, COARSE, fine, FINE) != BRISK_OK) bad = fail(s, "push");
        else if (k % STEPS_PER_EPOCH == 0) {
            int e = k / STEPS_PER_EPOCH - 1;
            if (brisk_session_train_epochs(s, 1) != BRISK_OK || brisk_session_query(s, "train_loss", &loss[e]) != BRISK_OK)
                bad = fail(s, "train");
            else
                printf("step %4d: trained epoch %d over the buffer, loss %.4f\n", k, e + 1, loss[e]);
        }
    }
    if (rank == 0 && !bad && !(loss[EPOCHS - 1] < loss[0])) {
        fprintf(stderr, "online: the loss did not decrease: %.4f -> %.4f\n", loss[0], loss[EPOCHS - 1]);
        bad = 1;
    }
    /* Downscale the last step's coarse fields (DDIM, 10 steps, eta 0), each chain starting from
     * noise around the coarse block values (the model's last noise level keeps signal, so pure
     * noise would be the wrong start), and score them. The imported model predicts them. */
    if (rank == 0 && !bad) {
        for (int j = 0; j < COLUMNS; j++)
            for (int i = 0; i < FINE; i++) sampled[j * FINE + i] = coarse[j * COARSE + i * COARSE / FINE];
        if (imported && brisk_session_predict(s, COLUMNS, coarse, COARSE, sampled, FINE) != BRISK_OK)
            bad = fail(s, "predict");
        else if (!imported && brisk_session_sample_guided(s, COLUMNS, coarse, COARSE, sampled, FINE, sampled, FINE,
                                                          BRISK_SAMPLER_DDIM, 10, 0.0, 1) != BRISK_OK)
            bad = fail(s, "sample");
        double se = 0, sb = 0;
        for (int j = 0; j < COLUMNS && !bad; j++)
            for (int i = 0; i < FINE; i++) {
                float v = sampled[j * FINE + i], t = fine[j * FINE + i], c = coarse[j * COARSE + i * COARSE / FINE];
                if (!isfinite(v)) bad = 1;
                se += (v - t) * (v - t);
                sb += (c - t) * (c - t);
            }
        if (bad) fprintf(stderr, "online: a sampled value is not finite\n");
        else
            printf("%s %d x %d fine values: RMSE to the truth %.4f (coarse block values: %.4f)\n",
                   imported ? "predicted" : "sampled", COLUMNS, FINE, sqrt(se / (COLUMNS * FINE)),
                   sqrt(sb / (COLUMNS * FINE)));
        if (!bad && imported && !(se < sb)) {
            fprintf(stderr, "online: the trained model is no closer to the truth than the coarse block values\n");
            bad = 1;
        }
        if (!bad && argc > 1 && brisk_session_save(s, argv[1]) != BRISK_OK) bad = fail(s, "save");
    }
#ifdef BRISK_EXAMPLE_MPI
    /* every rank gets its columns' sampled fields back, and everyone learns whether it worked */
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!bad) {
        MPI_Scatter(sampled, local * FINE, MPI_FLOAT, rank ? sampled : MPI_IN_PLACE, local * FINE, MPI_FLOAT, 0,
                    MPI_COMM_WORLD);
        for (int i = 0; i < local * FINE; i++) bad |= !isfinite(sampled[i]);
        printf("rank %d: %d sampled columns back, %s\n", rank, local, bad ? "NOT finite" : "all finite");
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    bad = any;
#endif
    brisk_session_destroy(s);
    free(coarse), free(fine), free(sampled);
#ifdef BRISK_EXAMPLE_MPI
    MPI_Finalize();
#endif
    if (rank == 0) printf("%s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
