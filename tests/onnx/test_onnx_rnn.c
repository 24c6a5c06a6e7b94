/* ONNX LSTM and GRU nodes imported (src/onnx/onnx_build_rnn.c) against a float64 reference
 * written from the ONNX operator definitions (gates i, o, f, c and z, r, h; Wb + Rb; GRU's
 * linear_before_reset 1), in the layouts and directions torch's export does not write
 * (layout 1, reverse, no B) and those it does: Y and Y_h forward, and the gradients of x, W,
 * R and B by finite differences. */
#include <unistd.h>

#include "onnx_build.h"
#include "ops/opcheck.h"
#include "onnx/onnx_import.h"

enum { T_ = 4, N_ = 2, I_ = 3, H_ = 3 };
static char dir[600];

static double sigm(double v) { return 1.0 / (1.0 + exp(-v)); }

/* row r of a [rows, cols] block times v */
static double dot(const float *w, int r, int cols, const double *v) {
    double s = 0;
    for (int k = 0; k < cols; k++) s += (double)w[r * cols + k] * v[k];
    return s;
}

/* One direction as ONNX defines it: x [T, N, I] (layout 0 order), w [G H, I], r [G H, H],
 * b [2 G H]; writes h_t into y[t][n] ([T, N, H]) and the last state into hn [N, H]. */
static void ref_direction(int gates, const double *x, const float *w, const float *r, const float *b, int reverse,
                          double *y, double *hn) {
    for (int n = 0; n < N_; n++) {
        double h[H_] = {0}, c[H_] = {0};
        for (int s = 0; s < T_; s++) {
            int t = reverse ? T_ - 1 - s : s;
            const double *xt = x + (t * N_ + n) * I_;
            double nh[H_];
            for (int j = 0; j < H_; j++) {
                double g[4];
                for (int k = 0; k < gates; k++) {
                    int row = k * H_ + j;
                    g[k] = dot(w, row, I_, xt) + b[row];
                    if (gates == 4 || k < 2) g[k] += dot(r, row, H_, h) + b[gates * H_ + row];
                }
                if (gates == 4) { /* i, o, f, c */
                    c[j] = sigm(g[2]) * c[j] + sigm(g[0]) * tanh(g[3]);
                    nh[j] = sigm(g[1]) * tanh(c[j]);
                } else { /* z, r, h: h~ = tanh(W x + Wb + r (R h + Rb)) */
                    int row = 2 * H_ + j;
                    double z = sigm(g[0]), rr = sigm(g[1]);
                    double hh = tanh(g[2] + rr * (dot(r, row, H_, h) + b[gates * H_ + row]));
                    nh[j] = (1 - z) * hh + z * h[j];
                }
            }
            memcpy(h, nh, sizeof h);
            for (int j = 0; j < H_; j++) y[(t * N_ + n) * H_ + j] = h[j];
        }
        for (int j = 0; j < H_; j++) hn[n * H_ + j] = h[j];
    }
}

static void add_init(brisk_pb *g, const char *name, const int64_t *d, int rank, const float *v) {
    brisk_pb t = {0};
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= d[k];
    ob_tensor(&t, name, BRISK_ONNX_FLOAT, d, rank, v, (size_t)n * sizeof *v);
    brisk_pb_message(g, 5, &t);
    brisk_pb_free(&t);
}

/* An LSTM (gates 4) or GRU (3) node of the given layout and direction, its W, R and B
 * initializers, and Identity nodes naming Y and Y_h; checked forward and backward. */
static void check_rnn(int gates, int layout, const char *direction, int with_b) {
    int dirs = !strcmp(direction, "bidirectional") ? 2 : 1, gh = gates * H_;
    char what[80];
    snprintf(what, sizeof what, "%s layout %d %s%s", gates == 4 ? "LSTM" : "GRU", layout, direction,
             with_b ? "" : " without B");
    oc c;
    oc_init(&c, (uint64_t)(gates * 100 + layout * 10 + dirs + (direction[0] == 'r')));
    /* the weights as the file holds them (the importer makes them parameters) */
    float w[2 * 4 * H_ * I_], r[2 * 4 * H_ * H_], b[2 * 8 * H_];
    oc_fill(&c, w, dirs * gh * I_, -0.8, 0.8, 0);
    oc_fill(&c, r, dirs * gh * H_, -0.8, 0.8, 0);
    memset(b, 0, sizeof b);
    if (with_b) oc_fill(&c, b, dirs * 2 * gh, -0.5, 0.5, 0);
    brisk_pb g = {0}, attrs = {0}, model = {0};
    ob_attr_int(&attrs, "hidden_size", H_);
    ob_attr_int(&attrs, "layout", layout);
    if (gates == 3) ob_attr_int(&attrs, "linear_before_reset", 1);
    ob_attr_string(&attrs, "direction", direction);
    ob_node(&g, gates == 4 ? "LSTM" : "GRU", with_b ? OB_LIST("x", "W", "R", "B") : OB_LIST("x", "W", "R"),
            OB_LIST("Y0", "Yh0"), &attrs);
    ob_node(&g, "Identity", OB_LIST("Yh0"), OB_LIST("Yh"), NULL);
    ob_node(&g, "Identity", OB_LIST("Y0"), OB_LIST("Y"), NULL);
    brisk_pb_string(&g, 2, "rnn");
    add_init(&g, "W", (const int64_t[]){dirs, gh, I_}, 3, w);
    add_init(&g, "R", (const int64_t[]){dirs, gh, H_}, 3, r);
    if (with_b) add_init(&g, "B", (const int64_t[]){dirs, 2 * gh}, 2, b);
    ob_value(&g, 11, "x", layout ? (const int64_t[]){N_, T_, I_} : (const int64_t[]){T_, N_, I_}, 3);
    ob_value(&g, 12, "Y", (const int64_t[]){T_, dirs, N_, H_}, 4);
    ob_model(&model, 8, 17, &g);
    char path[700];
    T_MAKE_DIR(dir, "onnx_rnn");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, what);
    for (char *p = strrchr(path, '/'); *p; p++) if (*p == ' ') *p = '_';
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fwrite(model.p, 1, model.n, f);
    fclose(f);
    brisk_pb_free(&g), brisk_pb_free(&attrs), brisk_pb_free(&model);

    brisk_error e;
    brisk_onnx_net *net = NULL;
    REQUIRE_OK(brisk_onnx_net_open(path, &net, &e), &e);
    int x = oc_param(&c, "x", layout ? brisk_shape3(N_, T_, I_) : brisk_shape3(T_, N_, I_));
    int outs[4] = {-1, -1, -1, -1};
    int rc = brisk_onnx_net_build(net, c.g, OB_LIST("x"), &x, 1, outs);
    brisk_onnx_net_free(net);
    CHECKF(rc == 0, "%s: %s", what, c.g->err.msg);
    if (rc) {
        oc_free(&c);
        return;
    }
    /* W, R and B (when given) join x among the parameters the finite differences move */
    const float *vals[3] = {w, r, b};
    for (int k = 0; k < 2 + with_b; k++) {
        int pk = c.g->n_params - 1;
        while (pk >= 0 && strcmp(c.g->params[pk].name, (const char *[]){"W", "R", "B"}[k])) pk--;
        REQUIRE(pk >= 0);
        int64_t n = brisk_shape_numel(&c.g->nodes[c.g->params[pk].node].shape);
        c.pnode[c.n_p] = c.g->params[pk].node, c.pn[c.n_p] = n;
        c.pval[c.n_p] = malloc((size_t)n * sizeof(float));
        memcpy(c.pval[c.n_p++], vals[k], (size_t)n * sizeof(float));
    }
    int y = outs[2], yh = outs[1];
    int64_t ny = T_ * dirs * N_ * H_, nh = dirs * N_ * H_;
    int parts[2] = {brisk_reshape(c.g, y, brisk_shape1(ny)), brisk_reshape(c.g, yh, brisk_shape1(nh))};
    int out = brisk_concat(c.g, parts, 2, 0);

    /* the reference: x in [T, N, I] order, each direction, then ONNX's output layouts */
    const float *xv = oc_val(&c, x);
    double xs[T_ * N_ * I_], yd[2][T_ * N_ * H_], hd[2][N_ * H_], ref[2 * T_ * N_ * H_ + 2 * N_ * H_];
    for (int t = 0; t < T_; t++)
        for (int n = 0; n < N_; n++)
            for (int i = 0; i < I_; i++) xs[(t * N_ + n) * I_ + i] = xv[layout ? (n * T_ + t) * I_ + i : (t * N_ + n) * I_ + i];
    for (int d = 0; d < dirs; d++)
        ref_direction(gates, xs, w + d * gh * I_, r + d * gh * H_, b + d * 2 * gh,
                      d == 1 || !strcmp(direction, "reverse"), yd[d], hd[d]);
    for (int t = 0; t < T_; t++)
        for (int d = 0; d < dirs; d++)
            for (int n = 0; n < N_; n++)
                for (int j = 0; j < H_; j++) /* layout 0: Y [T, dirs, N, H]; 1: [N, T, dirs, H] */
                    ref[layout ? ((n * T_ + t) * dirs + d) * H_ + j : ((t * dirs + d) * N_ + n) * H_ + j] =
                        yd[d][(t * N_ + n) * H_ + j];
    for (int d = 0; d < dirs; d++)
        for (int n = 0; n < N_; n++)
            for (int j = 0; j < H_; j++) /* layout 0: Y_h [dirs, N, H]; 1: [N, dirs, H] */
                ref[ny + (layout ? (n * dirs + d) * H_ + j : (d * N_ + n) * H_ + j)] = hd[d][n * H_ + j];
    oc_check(&c, out, ref, what);
    oc_free(&c);
}

static void lstm_layout0_forward(void) { check_rnn(4, 0, "forward", 1); }
static void lstm_layout1_reverse(void) { check_rnn(4, 1, "reverse", 1); }
static void lstm_layout1_bidirectional(void) { check_rnn(4, 1, "bidirectional", 1); }
static void gru_layout0_reverse(void) { check_rnn(3, 0, "reverse", 1); }
static void gru_without_b(void) { check_rnn(3, 0, "forward", 0); }
static void lstm_without_b(void) { check_rnn(4, 1, "forward", 0); }
static void gru_layout1_forward(void) { check_rnn(3, 1, "forward", 1); }
static void gru_layout0_bidirectional(void) { check_rnn(3, 0, "bidirectional", 1); }

static void cleanup(void) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

TEST_MAIN(T(lstm_layout0_forward), T(lstm_layout1_reverse), T(lstm_layout1_bidirectional), T(gru_layout0_reverse),
          T(gru_layout1_forward), T(gru_layout0_bidirectional), T(gru_without_b), T(lstm_without_b), T(cleanup))
