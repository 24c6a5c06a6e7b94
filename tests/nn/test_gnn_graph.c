/* The mesh GNN's graph construction on small grids against brute force: every grid node's
 * k mesh nodes are the k nearest (plane: exactly, ties to the lower index; sphere: the k
 * smallest great-circle distances by the haversine formula), every mesh node's neighbours
 * likewise without itself, mesh -> grid is grid -> mesh reversed, each edge set is ordered
 * by receiver, and the edge features are receiver minus sender and the distance. Bad
 * sizes are errors naming what was expected. */
#include "brisk/brisk.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>

typedef struct { double d; int i; } cand;
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return x->i - y->i;
}

static void latlon(const brisk_gnn_graph_spec *s, const float *pos, double *lat, double *lon) {
    *lon = (s->lon0 + (s->lon1 - s->lon0) * pos[0]) * M_PI / 180;
    *lat = (s->lat0 + (s->lat1 - s->lat0) * pos[1]) * M_PI / 180;
}

static double dist(const brisk_gnn_graph_spec *s, const float *a, const float *b) {
    if (s->metric == BRISK_GNN_PLANE) return hypot((double)a[0] - b[0], (double)a[1] - b[1]);
    double la, lo, lb, lob;
    latlon(s, a, &la, &lo);
    latlon(s, b, &lb, &lob);
    double h = pow(sin((lb - la) / 2), 2) + cos(la) * cos(lb) * pow(sin((lob - lo) / 2), 2);
    return 2 * asin(sqrt(h));
}

/* The k nearest of pos_b to query q (skipping `skip`), brute force, into out. */
static void brute(const brisk_gnn_graph_spec *s, const float *q, const float *pos_b, int64_t n, int skip, int k, cand *out) {
    cand *all = malloc((size_t)n * sizeof *all);
    int m = 0;
    for (int64_t j = 0; j < n; j++)
        if (j != skip) all[m++] = (cand){dist(s, q, pos_b + 2 * j), (int)j};
    qsort(all, (size_t)m, sizeof *all, cand_cmp);
    memcpy(out, all, (size_t)k * sizeof *out);
    free(all);
}

static void check_edges(const brisk_gnn_graph_spec *s, const brisk_gnn_edges *e, const float *ps, const float *pr,
                        const char *what) {
    int bad_order = 0, bad_feat = 0;
    for (int64_t i = 0; i < e->n; i++) {
        if (i && e->dst[i] < e->dst[i - 1]) bad_order++;
        const float *a = ps + 2 * e->src[i], *b = pr + 2 * e->dst[i], *f = e->feat + 3 * i;
        double d = dist(s, a, b);
        if (fabs(f[2] - d) > 1e-6 * (1 + d)) bad_feat++;
        if (s->metric == BRISK_GNN_PLANE && (f[0] != b[0] - a[0] || f[1] != b[1] - a[1])) bad_feat++;
        if (s->metric == BRISK_GNN_SPHERE && fabs(hypot(f[0], f[1]) - d) > 0.02 * d) bad_feat++; /* tangent plane */
    }
    CHECKF(bad_order == 0, "%s: %d edges out of receiver order", what, bad_order);
    CHECKF(bad_feat == 0, "%s: %d edges with wrong features", what, bad_feat);
}

static void check_graph(const brisk_gnn_graph_spec *s) {
    brisk_gnn_graph g;
    brisk_error err = {0};
    REQUIRE_OK(brisk_gnn_graph_build(s, &g, &err), &err);
    int64_t ng = s->grid_rows * s->grid_cols, nm = s->mesh_rows * s->mesh_cols;
    CHECK(g.n_grid == ng && g.n_mesh == nm && g.g2m.n == ng * s->k && g.m2g.n == ng * s->k && g.mm.n == nm * s->neighbours);
    cand want[64];
    int bad = 0;
    /* mesh -> grid holds, per grid node, its k mesh nodes nearest first */
    for (int64_t i = 0; i < ng; i++) {
        brute(s, g.grid_pos + 2 * i, g.mesh_pos, nm, -1, s->k, want);
        for (int j = 0; j < s->k; j++) {
            int64_t e = i * s->k + j;
            int got = g.m2g.src[e];
            if (g.m2g.dst[e] != i) bad++;
            else if (s->metric == BRISK_GNN_PLANE ? got != want[j].i
                                                  : fabs(dist(s, g.grid_pos + 2 * i, g.mesh_pos + 2 * got) - want[j].d) > 1e-9)
                bad++;
        }
    }
    CHECKF(bad == 0, "%d grid nodes' nearest mesh nodes differ from brute force", bad);
    /* grid -> mesh is the same pairs */
    int64_t *seen = calloc((size_t)(ng * nm), sizeof *seen);
    for (int64_t e = 0; e < g.m2g.n; e++) seen[(int64_t)g.m2g.dst[e] * nm + g.m2g.src[e]]++;
    for (int64_t e = 0; e < g.g2m.n; e++) seen[(int64_t)g.g2m.src[e] * nm + g.g2m.dst[e]]--;
    int64_t off = 0;
    for (int64_t i = 0; i < ng * nm; i++) off += seen[i] != 0;
    CHECKF(off == 0, "%lld grid -> mesh pairs are not mesh -> grid reversed", (long long)off);
    free(seen);
    bad = 0;
    for (int64_t m = 0; m < nm; m++) {
        brute(s, g.mesh_pos + 2 * m, g.mesh_pos, nm, (int)m, s->neighbours, want);
        for (int j = 0; j < s->neighbours; j++) {
            int64_t e = m * s->neighbours + j;
            int got = g.mm.src[e];
            if (g.mm.dst[e] != m || got == m) bad++;
            else if (s->metric == BRISK_GNN_PLANE ? got != want[j].i
                                                  : fabs(dist(s, g.mesh_pos + 2 * m, g.mesh_pos + 2 * got) - want[j].d) > 1e-9)
                bad++;
        }
    }
    CHECKF(bad == 0, "%d mesh neighbour edges differ from brute force", bad);
    check_edges(s, &g.g2m, g.grid_pos, g.mesh_pos, "grid -> mesh");
    check_edges(s, &g.m2g, g.mesh_pos, g.grid_pos, "mesh -> grid");
    check_edges(s, &g.mm, g.mesh_pos, g.mesh_pos, "mesh -> mesh");
    /* positions as torch_ref.grid_xy: grid (i / n), mesh ((i + 0.5) / n), x = column */
    CHECK(g.grid_pos[2 * 1] == 1.0f / (float)s->grid_cols && g.grid_pos[2 * s->grid_cols + 1] == 1.0f / (float)s->grid_rows);
    CHECK(g.mesh_pos[0] == 0.5f / (float)s->mesh_cols);
    brisk_gnn_graph_free(&g);
}

static void test_plane(void) {
    brisk_gnn_graph_spec s = {.grid_rows = 16, .grid_cols = 16, .mesh_rows = 8, .mesh_cols = 8, .k = 4, .neighbours = 8};
    check_graph(&s);
    brisk_gnn_graph_spec r = {.grid_rows = 9, .grid_cols = 14, .mesh_rows = 3, .mesh_cols = 5, .k = 3, .neighbours = 6};
    check_graph(&r);
}

static void test_sphere(void) {
    brisk_gnn_graph_spec s = {.grid_rows = 12, .grid_cols = 16, .mesh_rows = 6, .mesh_cols = 8, .k = 4, .neighbours = 8,
                              .metric = BRISK_GNN_SPHERE, .lat0 = 30, .lat1 = 60, .lon0 = -20, .lon1 = 25};
    check_graph(&s);
}

static void test_bad(void) {
    brisk_gnn_graph g;
    brisk_error err = {0};
    brisk_gnn_graph_spec s = {.grid_rows = 4, .grid_cols = 4, .mesh_rows = 8, .mesh_cols = 8, .k = 4, .neighbours = 8};
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "smaller than the mesh"));
    s = (brisk_gnn_graph_spec){.grid_rows = 4, .grid_cols = 4, .mesh_rows = 2, .mesh_cols = 2, .k = 5, .neighbours = 3};
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "k = 5"));
    s.k = 4, s.neighbours = 4;
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "neighbours = 4"));
    s.neighbours = 3, s.grid_rows = 0;
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID);
    s.grid_rows = 4, s.metric = BRISK_GNN_SPHERE, s.lat0 = 50, s.lat1 = 40, s.lon1 = 10;
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "domain"));
}

TEST_MAIN(T(test_plane), T(test_sphere), T(test_bad))
