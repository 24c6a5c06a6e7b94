/* World size 1 on the GPU: no collective (the backend's NCCL all-reduce is never reached, no
 * communicator is made), the same losses as without a group, bit for bit in deterministic mode
 * (dist_alone.h). Skips without a GPU; tools/gpu-session.sh runs it (ctest -R cuda). */
#include "backend/cuda_test_util.h"
#include "dist/dist_alone.h"

static void test_cuda_alone(void) { check_alone("cuda"); }

CUDA_TEST_MAIN(T(test_cuda_alone))
