/* brisk check: what hardware and libraries brisk sees, and why there is no GPU. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cmd_check(int argc, char **argv) {
    int require_gpu = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            puts("usage: brisk check [--require-gpu]\n\n"
                 "Prints the CPU, threads, vector extensions, BLAS and GPU status brisk sees.\n"
                 "  --require-gpu   exit with status 3 when no GPU can be used");
            return 0;
        }
        if (strcmp(argv[i], "--require-gpu") == 0) require_gpu = 1;
        else return cli_fail("check: unknown option '%s' (see brisk check --help)", argv[i]);
    }
    brisk_system_info s;
    brisk_system_probe(&s);
    printf("brisk %s\n", s.version);
    printf("cpu       %s, %d cores, %d OpenMP threads, %s\n", s.cpu_model, s.cpu_cores, s.omp_threads, s.simd);
    printf("blas      %s\n", s.blas_name);
    printf("cuda      %s\n", s.cuda_built ? "backend built" : "not built (CPU-only build)");
    printf("gpu       %s\n", s.gpu_usable ? "usable" : s.gpu_reason);
    printf("device    training runs on the %s\n", s.gpu_usable ? "GPU" : "CPU");
    if (require_gpu && !s.gpu_usable) {
        fprintf(stderr, "brisk: check: --require-gpu: %s\n", s.gpu_reason);
        return 3;
    }
    return 0;
}
