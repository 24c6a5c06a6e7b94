/* The embedded API data parallel: under mpirun -np 2, each rank (a simulation's rank) creates
 * a session on MPI_COMM_WORLD through "session": {"mpi_comm": MPI_Comm_c2f(comm)}, pushes
 * samples of its own and trains. The ranks' models must end identical (gradients averaged
 * over the ranks: rank 0's and rank 1's predictions agree bit for bit), and differ from what
 * the same ranks train alone (without mpi_comm, on different data). Rank 0 alone writes
 * train.out_dir. A bad handle and unequal step counts are errors naming them; so are ranks
 * that disagree on the config or stand at different steps (on every rank). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/api.h"

static int failed;
#define EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: FAIL %s: ", rank, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failed = 1; } } while (0)
static int rank;

enum { N = 256, IN = 16, CLASSES = 3, PROBE = 8 };

/* which all-reduce path the session took: a program that called MPI_Init (MPI_THREAD_SINGLE
 * here) gets the after-backward one, and the log says why */
static int said_overlap, said_fallback;
static void on_log(void *user, brisk_log_level level, const char *msg) {
    (void)user, (void)level;
    said_overlap |= strstr(msg, "overlapped with backward (a communication thread)") != NULL;
    said_fallback |= strstr(msg, "after backward (MPI granted less than MPI_THREAD_SERIALIZED)") != NULL;
}

/* lr: optim.lr, 0 for its default */
static brisk_status create(int comm, const char *out_dir, double lr, brisk_session **s) {
    char cfg[1024], session[64] = "", optim[64] = "";
    if (comm >= 0) snprintf(session, sizeof session, ", \"session\": {\"mpi_comm\": %d}", comm);
    if (lr > 0) snprintf(optim, sizeof optim, ", \"optim\": {\"lr\": %g}", lr);
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": %d, \"hidden\": [32], \"outputs\": %d},"
             " \"data\": {\"validation_fraction\": 0},"
             " \"train\": {\"batch_size\": 32, \"seed\": 5, \"out_dir\": \"%s\", \"checkpoint_every\": 4},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}%s%s}",
             IN, CLASSES, out_dir, session, optim);
    return brisk_session_create(cfg, on_log, NULL, s);
}

static brisk_session *make(int comm, const char *out_dir) {
    brisk_session *s = NULL;
    if (create(comm, out_dir, 0, &s) != BRISK_OK) {
        fprintf(stderr, "rank %d: create: %s\n", rank, brisk_session_error(s));
        exit(1);
    }
    return s;
}

static float x[N * IN], y[N];

/* trains on this rank's own samples; the predictions of a fixed probe set */
static void train(brisk_session *s, float *probe_out) {
    static float probe[PROBE * IN];
    unsigned seed = 17u + 1000u * (unsigned)rank; /* each rank's own data */
    for (int i = 0; i < N; i++) {
        float sum = 0;
        for (int j = 0; j < IN; j++) {
            seed = seed * 1103515245u + 12345u;
            x[i * IN + j] = (float)((seed >> 16) & 1023) / 512.0f - 1.0f;
            sum += x[i * IN + j] * (float)(j % 3 - 1);
        }
        y[i] = sum > 0.3f ? 2.0f : sum < -0.3f ? 0.0f : 1.0f;
    }
    for (int i = 0; i < PROBE * IN; i++) probe[i] = (float)(i % 7) / 7.0f - 0.5f;
    if (brisk_session_push(s, N, x, 0, y, 0) || brisk_session_train_steps(s, 12) ||
        brisk_session_predict(s, PROBE, probe, 0, probe_out, 0)) {
        fprintf(stderr, "rank %d: %s\n", rank, brisk_session_error(s));
        exit(1);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const char *base = argc > 1 ? argv[1] : "session_mpi";
    char dir[512], alone_dir[512];
    snprintf(dir, sizeof dir, "%s/together", base);
    snprintf(alone_dir, sizeof alone_dir, "%s/alone%d", base, rank);
    float mine[PROBE * CLASSES], other[PROBE * CLASSES];

    brisk_session *s = make((int)MPI_Comm_c2f(MPI_COMM_WORLD), dir);
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level >= MPI_THREAD_SERIALIZED) EXPECT(said_overlap && !said_fallback, "the log should say the overlap ran");
    else EXPECT(said_fallback && !said_overlap, "the log should say the all-reduce runs after backward (thread level %d)",
                level);
    printf("rank %d: MPI thread level %d: the gradient all-reduce %s\n", rank, level,
           said_overlap ? "overlaps backward" : said_fallback ? "runs after backward" : "(not logged)");
    train(s, mine);
    MPI_Sendrecv(mine, PROBE * CLASSES, MPI_FLOAT, 1 - rank, 0, other, PROBE * CLASSES, MPI_FLOAT, 1 - rank, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT(memcmp(mine, other, sizeof mine) == 0, "the ranks' models differ after data-parallel training");
    /* unequal step counts: refused on every rank, naming them */
    brisk_status st = brisk_session_train_steps(s, rank == 0 ? 2 : 3);
    EXPECT(st == BRISK_ERR_INVALID && strstr(brisk_session_error(s), "every rank must train the same number of steps"),
           "%s", brisk_session_error(s));
    brisk_session_destroy(s);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char p[600];
        snprintf(p, sizeof p, "%s/last.safetensors", dir);
        EXPECT(access(p, F_OK) == 0, "rank 0 wrote no %s", p);
    }

    s = make(-1, alone_dir); /* the same, each rank alone: the models differ */
    train(s, mine);
    brisk_session_destroy(s);
    MPI_Sendrecv(mine, PROBE * CLASSES, MPI_FLOAT, 1 - rank, 0, other, PROBE * CLASSES, MPI_FLOAT, 1 - rank, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT(memcmp(mine, other, sizeof mine) != 0, "ranks training alone on different data agree: no test");

    /* ranks that disagree: every rank's create fails, naming the key, the ranks and the values */
    brisk_session *lr = NULL;
    int comm = (int)MPI_Comm_c2f(MPI_COMM_WORLD);
    st = create(comm, "", rank == 1 ? 0.002 : 0.001, &lr);
    EXPECT(st == BRISK_ERR_INVALID && strstr(brisk_session_error(lr), "ranks disagree on optim.lr: rank 0 has 0.001, "
                                                                      "rank 1 has 0.002"), "%s", brisk_session_error(lr));
    brisk_session_destroy(lr);
    /* rank 1 loads the 2-rank run's checkpoint, rank 0 does not: no rank trains, each names both steps */
    brisk_session *at = make(comm, "");
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/last.safetensors", dir);
    EXPECT(brisk_session_push(at, N, x, 0, y, 0) == BRISK_OK && (rank == 0 || brisk_session_load(at, ckpt) == BRISK_OK),
           "%s", brisk_session_error(at));
    st = brisk_session_train_steps(at, 2);
    EXPECT(st == BRISK_ERR_INVALID && strstr(brisk_session_error(at), "ranks disagree on the training position: rank 0 "
                                                                      "has step 0 (a new run), rank 1 has step 12 ("),
           "%s", brisk_session_error(at));
    brisk_session_destroy(at);

    /* a handle that is no communicator */
    brisk_session *bad = NULL;
    EXPECT(brisk_session_create("{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"outputs\": 2},"
                                " \"session\": {\"mpi_comm\": -5}}", NULL, NULL, &bad) == BRISK_ERR_INVALID &&
               strstr(brisk_session_error(bad), "mpi_comm"), "%s", brisk_session_error(bad));
    brisk_session_destroy(bad);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\n", any ? "FAIL" : "PASS: 2 ranks of one session train one model");
    MPI_Finalize();
    return any;
}
