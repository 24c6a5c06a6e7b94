/* A bad "session": {"mpi_comm": H} is an error of brisk_session_create, never an abort of the
 * host: given before MPI_Init (Open MPI's MPI_Comm_f2c aborts there), a handle that names no
 * communicator, MPI_COMM_NULL's, a freed communicator's (each of these fired the host's
 * MPI_ERRORS_ARE_FATAL in MPI_Comm_dup on 0e9846d), and after MPI_Finalize; a valid one still
 * works and the host's error handler is given back. Run under mpirun -np 1 (api.cmake). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "brisk/brisk.h"

static int failed;

static void config(char *buf, size_t n, long long comm) {
    snprintf(buf, n, "{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2},"
             " \"train\": {\"batch_size\": 4}, \"speed\": {\"threads\": 1, \"prefetch\": 0},"
             " \"session\": {\"mpi_comm\": %lld}}", comm);
}

/* Creation with handle `comm` must give `want` and a message holding `text`. */
static void expect(const char *what, long long comm, brisk_status want, const char *text) {
    char cfg[512];
    config(cfg, sizeof cfg, comm);
    brisk_session *s = NULL;
    brisk_status st = brisk_session_create(cfg, NULL, NULL, &s);
    const char *msg = brisk_session_error(s);
    if (st != want || (text && !strstr(msg, text))) {
        fprintf(stderr, "FAIL %s: %s '%s' (expected %s and '%s')\n", what, brisk_status_name(st), msg,
                brisk_status_name(want), text ? text : "");
        failed = 1;
    } else {
        printf("ok   %s: %s\n", what, st ? msg : "created");
    }
    brisk_session_destroy(s);
}

int main(int argc, char **argv) {
    expect("before MPI_Init", 0, BRISK_ERR_INVALID, "MPI is not initialised");
    MPI_Init(&argc, &argv);
    expect("a handle of no communicator", 987654, BRISK_ERR_INVALID, "not a valid one");
    expect("MPI_COMM_NULL", MPI_Comm_c2f(MPI_COMM_NULL), BRISK_ERR_INVALID, "MPI_COMM_NULL");
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    long long freed = MPI_Comm_c2f(dup);
    MPI_Comm_free(&dup);
    expect("a freed communicator", freed, BRISK_ERR_INVALID, "not a valid one");
    expect("MPI_COMM_WORLD", MPI_Comm_c2f(MPI_COMM_WORLD), BRISK_OK, NULL);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    if (eh != MPI_ERRORS_ARE_FATAL) {
        fprintf(stderr, "FAIL the host's error handler of MPI_COMM_WORLD was not given back\n");
        failed = 1;
    }
    MPI_Errhandler_free(&eh);
    MPI_Finalize();
    expect("after MPI_Finalize", 0, BRISK_ERR_INVALID, "finalised");
    printf("%s\n", failed ? "FAIL" : "PASS: every bad handle refused, no abort");
    return failed;
}
