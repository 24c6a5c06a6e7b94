/* float64 references for POINTWISE_LOSS, shared by the op tests (tests/ops) and the CPU
 * kernel tests (tests/backend): each element's term and its derivative in pred. */
#ifndef BRISK_TEST_LOSS_REF_H
#define BRISK_TEST_LOSS_REF_H

#include "brisk/graph.h"

#include <math.h>

static inline double lref_term(int kind, double p, double t, double delta) {
    double d = p - t;
    switch (kind) {
    case BRISK_LOSS_MSE: return d * d;
    case BRISK_LOSS_L1: return fabs(d);
    case BRISK_LOSS_HUBER: return fabs(d) < delta ? 0.5 * d * d : delta * (fabs(d) - 0.5 * delta);
    default: return fmax(p, 0) - p * t + log1p(exp(-fabs(p)));
    }
}

static inline double lref_slope(int kind, double p, double t, double delta) {
    double d = p - t;
    switch (kind) {
    case BRISK_LOSS_MSE: return 2 * d;
    case BRISK_LOSS_L1: return d > 0 ? 1 : d < 0 ? -1 : 0;
    case BRISK_LOSS_HUBER: return d < -delta ? -delta : d > delta ? delta : d;
    default: return 1 / (1 + exp(-p)) - t;
    }
}

#endif
