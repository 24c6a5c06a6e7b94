/* The process group without MPI calls: where rank and world size come from (environment),
 * the sharding and bucket arithmetic, and the accessors. The transport is in mpi.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

/* An environment variable holding an integer >= 0; -1 when unset, -2 when malformed. */
static long env_int(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s) return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 ? -2 : v;
}

int brisk_dist_mpi_launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int brisk_dist_env_rank(int *world) {
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};
    *world = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        long r = env_int(vars[i][0]), n = env_int(vars[i][1]);
        if (r == -1 && n == -1) continue;
        if (r < 0 || n < 1 || r >= n || n > INT32_MAX) return -1;
        *world = (int)n;
        return (int)r;
    }
    return -1;
}

const char *brisk_dist_launcher(void) {
    /* first: mpirun started inside a SLURM job inherits SLURM's variables too (its daemons are
     * a job step), so those say nothing until the MPI launchers' own are ruled out */
    if (getenv("OMPI_MCA_orte_hnp_uri") || getenv("OMPI_COMM_WORLD_SIZE")) return "mpirun";
    if (getenv("MPI_LOCALNRANKS")) return "mpiexec"; /* MPICH's and Intel MPI's Hydra */
    if (getenv("SLURM_STEP_ID")) return "srun";
    return "an MPI launcher";
}

brisk_status brisk_dist_from_env(brisk_dist *d, brisk_error *err) {
    static const struct {
        const char *rank, *size, *local, *source;
    } kinds[] = {{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM environment"},
                 {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun environment"}};
    d->rank = 0, d->world = 1, d->local_rank = 0;
    snprintf(d->source, sizeof d->source, "single process");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        long r = env_int(kinds[k].rank), n = env_int(kinds[k].size), l = env_int(kinds[k].local);
        if (r == -1 && n == -1) continue;
        if (r < 0 || n < 1 || r >= n || l == -2)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s=%s, %s=%s; expected 0 <= rank < size",
                                kinds[k].source, kinds[k].rank, getenv(kinds[k].rank) ? getenv(kinds[k].rank) : "(unset)",
                                kinds[k].size, getenv(kinds[k].size) ? getenv(kinds[k].size) : "(unset)");
        d->rank = (int)r, d->world = (int)n, d->local_rank = l >= 0 ? (int)l : 0;
        snprintf(d->source, sizeof d->source, "%s", kinds[k].source);
        break;
    }
    if (d->world > 1)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED,
                            "%s gives world size %d, but %s: data-parallel training runs over MPI; %s",
                            d->source, d->world,
                            brisk_dist_have_mpi() ? "this process was not started by an MPI launcher"
                                                  : "this brisk was built without MPI",
                            brisk_dist_have_mpi() ? "start it with mpirun -np N or srun --mpi=pmix"
                                                  : "install libopenmpi-dev (tools/install-deps.sh) and rebuild, then "
                                                    "start it with mpirun -np N or srun --mpi=pmix");
    return BRISK_OK;
}

void brisk_dist_shard(int64_t n, int world, int rank, int64_t *offset, int64_t *count) {
    int64_t base = n / world, extra = n % world;
    *offset = rank * base + (rank < extra ? rank : extra);
    *count = base + (rank < extra ? 1 : 0);
}

void brisk_dist_shard_bounds(int64_t n, int world, int64_t *bounds) {
    for (int r = 0; r < world; r++) {
        int64_t count;
        brisk_dist_shard(n, world, r, &bounds[r], &count);
    }
    bounds[world] = n;
}

/* Emits floats [lo, hi) as buckets: one, or pieces of `per` floats (from the top down) when
 * it holds two buckets or more. */
static int64_t emit(int64_t lo, int64_t hi, int64_t per, brisk_dist_bucket *out, int64_t nb, int64_t cap) {
    if (hi - lo < 2 * per) {
        if (nb < cap) out[nb] = (brisk_dist_bucket){lo, hi - lo};
        return nb + 1;
    }
    for (int64_t top = hi; top > lo; top -= per, nb++) {
        int64_t bot = top - per > lo ? top - per : lo;
        if (nb < cap) out[nb] = (brisk_dist_bucket){bot, top - bot};
    }
    return nb;
}

int64_t brisk_dist_plan_buckets(const int64_t *offsets, const int64_t *sizes, int n_tensors, int64_t bucket_bytes,
                                brisk_dist_bucket *out, int64_t cap) {
    int64_t nb = 0, lo = -1, hi = -1; /* the open bucket: floats [lo, hi) */
    int64_t per = bucket_bytes / (int64_t)sizeof(float);
    if (per < 1) per = 1;
    for (int i = n_tensors - 1; i >= 0; i--) {
        if (sizes[i] <= 0) continue;
        int64_t a = offsets[i], b = offsets[i] + sizes[i];
        if (hi < 0) hi = b;
        lo = lo < 0 || a < lo ? a : lo;
        if (hi - lo >= per) {
            nb = emit(lo, hi, per, out, nb, cap);
            lo = hi = -1;
        }
    }
    if (hi >= 0) nb = emit(lo, hi, per, out, nb, cap);
    return nb;
}

int brisk_dist_env_local_rank(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        long v = env_int(vars[i]);
        if (v >= 0) return v > 65535 ? 0 : (int)v;
    }
    return 0;
}

void brisk_dist_abandon(brisk_dist *d) {
    if (d && d->world > 1 && !d->failed_together) d->broken = 1;
}

int brisk_dist_failed(const brisk_dist *d) { return d ? d->broken : 0; }
int brisk_dist_rank(const brisk_dist *d) { return d ? d->rank : 0; }
int brisk_dist_world(const brisk_dist *d) { return d ? d->world : 1; }
int brisk_dist_local_rank(const brisk_dist *d) { return d ? d->local_rank : 0; }
const char *brisk_dist_source(const brisk_dist *d) { return d ? d->source : "single process"; }
void brisk_dist_set_timeout(brisk_dist *d, double seconds) { d->timeout_s = seconds; }
void brisk_dist_set_bucket_bytes(brisk_dist *d, int64_t bytes) { d->bucket_bytes = bytes > 4 ? bytes : 4; }
int64_t brisk_dist_bucket_bytes(const brisk_dist *d) { return d->bucket_bytes; }
int64_t brisk_dist_collectives(const brisk_dist *d) { return d ? d->collectives : 0; }
int64_t brisk_dist_bytes(const brisk_dist *d) { return d ? d->bytes : 0; }
double brisk_dist_wait_seconds(const brisk_dist *d) { return d ? d->wait_s : 0; }
