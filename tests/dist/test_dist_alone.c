/* World size 1 on the CPU: no collective, the same losses as without a group (dist_alone.h). */
#include "dist/dist_alone.h"

static void test_cpu_alone(void) { check_alone("cpu"); }

TEST_MAIN(T(test_cpu_alone))
