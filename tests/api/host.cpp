// A C++ simulation host as users write one around brisk: an OpenMP solver advancing its
// columns, a worker thread training in the background, and the main thread pushing each
// step's columns while the worker trains. It also defines functions named as brisk's
// internal ones (cpu_matmul, nn_resnet_forward): the library must export brisk_* alone, so
// the program still links and its own functions are the ones called. Built in the test tree
// (ASan/UBSan in `make sanitize`, TSan in `make tsan`) and, in tests/cli/install.sh, as a
// LANGUAGES CXX project against the installed package. Prints "PASS ..." and exits 0.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "brisk/api.h"

extern "C" int cpu_matmul(int a, int b) { return a * b + 1; }     // the host's own, not brisk's
extern "C" int nn_resnet_forward(void) { return 42; }

static int fail(const char *what, brisk_session *s) {
    std::fprintf(stderr, "FAIL %s: %s\n", what, brisk_session_error(s));
    return 1;
}

int main() {
    if (cpu_matmul(3, 4) != 13 || nn_resnet_forward() != 42) return fail("the host's own functions", nullptr);
    int major = -1;
    const char *v = brisk_version(&major, nullptr, nullptr);
    if (major != BRISK_VERSION_MAJOR || !v || !*v) return fail("brisk_version", nullptr);

    const int cols = 64, in = 6, out = 2, steps = 40;
    const char *cfg = "{\"model\": {\"type\": \"mlp\", \"inputs\": 6, \"hidden\": [32], \"outputs\": 2, \"task\": "
                      "\"regress\"}, \"data\": {\"validation_fraction\": 0, \"buffer\": {\"capacity\": 2048}},"
                      " \"train\": {\"batch_size\": 32, \"seed\": 1}, \"speed\": {\"threads\": 2, \"prefetch\": 0}}";
    brisk_session *s = nullptr;
    if (brisk_session_create(cfg, nullptr, nullptr, &s) != BRISK_OK) return fail("create", s);

    std::vector<float> state(cols * in), target(cols * out);
    for (int i = 0; i < cols * in; i++) state[i] = std::sin(0.1f * i);
    // the first step's columns, so that the worker has something to train on
    for (int c = 0; c < cols; c++)
        for (int o = 0; o < out; o++) target[c * out + o] = state[c * in + o] * 2;
    if (brisk_session_push(s, cols, state.data(), 0, target.data(), 0) != BRISK_OK) return fail("push", s);

    std::atomic<bool> done{false};
    std::atomic<int> trained{0}, train_failed{0};
    std::thread worker([&] {
        while (!done.load()) {
            if (brisk_session_train_steps(s, 5) != BRISK_OK) { train_failed = 1; return; }
            trained += 5;
        }
    });
    for (int k = 0; k < steps; k++) {
#pragma omp parallel for
        for (int c = 0; c < cols; c++) { // the solver: each column's state advances
            for (int i = 0; i < in; i++) state[c * in + i] = std::tanh(state[c * in + i] + 0.01f * (c + i + k));
            for (int o = 0; o < out; o++) target[c * out + o] = state[c * in + o] * 2;
        }
        if (brisk_session_push(s, cols, state.data(), 0, target.data(), 0) != BRISK_OK) return fail("push", s);
    }
    while (trained.load() < 20 && !train_failed.load()) std::this_thread::yield();
    done = true;
    worker.join();
    if (train_failed.load()) return fail("train (worker thread)", s);
    double pushed = 0, nsteps = 0;
    if (brisk_session_query(s, "pushed", &pushed) || brisk_session_query(s, "steps", &nsteps)) return fail("query", s);
    std::vector<float> pred(cols * out);
    if (brisk_session_predict(s, cols, state.data(), 0, pred.data(), 0) != BRISK_OK) return fail("predict", s);
    for (float p : pred)
        if (!std::isfinite(p)) return fail("predict: a non-finite output", s);
    if (pushed != cols * (steps + 1) || nsteps != trained.load()) {
        std::fprintf(stderr, "FAIL pushed %g (expected %d), steps %g (trained %d)\n", pushed, cols * (steps + 1), nsteps,
                     trained.load());
        return 1;
    }
    if (brisk_session_destroy(s) != BRISK_OK) return fail("destroy", s);
    std::printf("PASS a C++ host: OpenMP solver, %d steps trained on a worker thread while %g rows were pushed\n",
                trained.load(), pushed);
    return 0;
}
