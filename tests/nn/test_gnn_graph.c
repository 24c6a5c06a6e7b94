/* The mesh GNN's graph construction on small grids against brute force: every grid node's
 * k mesh nodes are the k nearest (plane: exactly, ties to the lower index; sphere: the k
 * smallest great-circle distances by the haversine formula), every mesh node's neighbours
 * likewise without itself, mesh -> grid is grid -> mesh reversed, each edge set is ordered
 * by receiver, and the edge features are receiver minus sender and the distance. Bad
 * sizes are errors naming what was expected. Icosahedral meshes likewise (distances, within
 * float rounding), with even spacing and the errors for a non-global domain. The graph cache: written once, read back equal
 * to a fresh build, a different spec in its own file, a corrupt or truncated file rebuilt. */
#include "brisk/brisk.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    /* positions as grid_xy of bench/reference/models.py: grid (i / n), mesh ((i + 0.5) / n), x = column */
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

/* Icosahedral meshes: 10 * 4^r + 2 distinct nodes on the sphere, and every nearest-node
 * choice checked by brute force from the float positions, as distances (the icosahedron's
 * symmetric ties are broken by the builder's double-precision vectors, which the float
 * positions only approximate to ~1e-7 rad). */
static void check_ico(int r, int64_t grid_rows, int k, int neighbours) {
    brisk_gnn_graph_spec s = {.grid_rows = grid_rows, .grid_cols = 2 * grid_rows, .k = k, .neighbours = neighbours,
                              .metric = BRISK_GNN_SPHERE, .lat0 = -90, .lat1 = 90, .lon0 = -180, .lon1 = 180,
                              .icosahedral = r + 1};
    brisk_gnn_graph g;
    brisk_error err = {0};
    REQUIRE_OK(brisk_gnn_graph_build(&s, &g, &err), &err);
    int64_t nm = 10 * ((int64_t)1 << (2 * r)) + 2, ng = s.grid_rows * s.grid_cols;
    CHECKF(g.n_mesh == nm && brisk_gnn_mesh_nodes(&s) == nm && g.n_grid == ng && g.mm.n == nm * neighbours &&
           g.g2m.n == ng * k, "refinement %d: %lld mesh nodes", r, (long long)g.n_mesh);
    int dup = 0, bad = 0;
    double dmin = 10, dmax = 0;
    for (int64_t a = 0; a < nm; a++) {
        CHECK(g.mesh_pos[2 * a] >= 0 && g.mesh_pos[2 * a] <= 1 && g.mesh_pos[2 * a + 1] >= 0 && g.mesh_pos[2 * a + 1] <= 1);
        double nearest = 10;
        for (int64_t b = 0; b < nm; b++)
            if (b != a) {
                double d = dist(&s, g.mesh_pos + 2 * a, g.mesh_pos + 2 * b);
                if (d < 1e-6) dup++;
                if (d < nearest) nearest = d;
            }
        if (nearest < dmin) dmin = nearest;
        if (nearest > dmax) dmax = nearest;
    }
    CHECKF(dup == 0, "refinement %d: %d coincident mesh nodes", r, dup);
    CHECKF(dmax < 1.35 * dmin, "refinement %d: nearest-neighbour spacing from %g to %g rad (not uniform)", r, dmin, dmax);
    cand want[64];
    for (int64_t i = 0; i < ng; i++) {
        brute(&s, g.grid_pos + 2 * i, g.mesh_pos, nm, -1, k, want);
        for (int j = 0; j < k; j++) {
            int64_t e = i * k + j;
            if (g.m2g.dst[e] != i || fabs(dist(&s, g.grid_pos + 2 * i, g.mesh_pos + 2 * g.m2g.src[e]) - want[j].d) > 2e-6)
                bad++;
        }
    }
    for (int64_t m = 0; m < nm; m++) {
        brute(&s, g.mesh_pos + 2 * m, g.mesh_pos, nm, (int)m, neighbours, want);
        for (int j = 0; j < neighbours; j++) {
            int64_t e = m * neighbours + j;
            if (g.mm.dst[e] != m || g.mm.src[e] == m ||
                fabs(dist(&s, g.mesh_pos + 2 * m, g.mesh_pos + 2 * g.mm.src[e]) - want[j].d) > 2e-6)
                bad++;
        }
    }
    CHECKF(bad == 0, "refinement %d: %d edges differ from brute force", r, bad);
    /* features as check_edges, to the float positions' rounding; the tangent-plane
     * displacement matches the arc only for short edges */
    const brisk_gnn_edges *es[2] = {&g.g2m, &g.mm};
    const float *from[2] = {g.grid_pos, g.mesh_pos};
    int bad_feat = 0;
    for (int t = 0; t < 2; t++)
        for (int64_t i = 0; i < es[t]->n; i++) {
            const float *f = es[t]->feat + 3 * i;
            double d = dist(&s, from[t] + 2 * es[t]->src[i], g.mesh_pos + 2 * es[t]->dst[i]);
            if ((i && es[t]->dst[i] < es[t]->dst[i - 1]) || fabs(f[2] - d) > 3e-6 ||
                (d < 0.3 && fabs(hypot(f[0], f[1]) - d) > 0.02 * d + 1e-6)) /* + coincident nodes */
                bad_feat++;
        }
    CHECKF(bad_feat == 0, "refinement %d: %d edges with wrong features or out of receiver order", r, bad_feat);
    brisk_gnn_graph_free(&g);
}

static void test_icosahedral(void) {
    check_ico(0, 6, 3, 5);
    check_ico(2, 12, 4, 6);
    brisk_gnn_graph g;
    brisk_error err = {0};
    brisk_gnn_graph_spec s = {.grid_rows = 16, .grid_cols = 32, .k = 3, .neighbours = 6, .metric = BRISK_GNN_SPHERE,
                              .lat0 = -90, .lat1 = 90, .lon0 = 0, .lon1 = 360, .icosahedral = 9};
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "refinement 8"));
    s.icosahedral = 3, s.lat0 = -60; /* regional */
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "globe"));
    s.lat0 = -90, s.metric = BRISK_GNN_PLANE;
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "sphere"));
    s.metric = BRISK_GNN_SPHERE, s.grid_rows = 8, s.grid_cols = 16; /* 128 grid nodes, 162 mesh nodes */
    CHECK(brisk_gnn_graph_build(&s, &g, &err) == BRISK_ERR_INVALID && strstr(err.msg, "smaller than the icosahedral"));
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

static int edges_equal(const brisk_gnn_edges *a, const brisk_gnn_edges *b) {
    return a->n == b->n && !memcmp(a->src, b->src, (size_t)a->n * 4) && !memcmp(a->dst, b->dst, (size_t)a->n * 4) &&
           !memcmp(a->feat, b->feat, (size_t)a->n * 12);
}

static int graphs_equal(const brisk_gnn_graph *a, const brisk_gnn_graph *b) {
    return a->n_grid == b->n_grid && a->n_mesh == b->n_mesh &&
           !memcmp(a->grid_pos, b->grid_pos, (size_t)a->n_grid * 8) &&
           !memcmp(a->mesh_pos, b->mesh_pos, (size_t)a->n_mesh * 8) && edges_equal(&a->g2m, &b->g2m) &&
           edges_equal(&a->mm, &b->mm) && edges_equal(&a->m2g, &b->m2g);
}

/* Builds through the cache in dir and compares with a fresh build; returns what the cache did. */
static brisk_gnn_cache_result cached(const brisk_gnn_graph_spec *s, const char *dir) {
    brisk_gnn_graph fresh, c;
    brisk_error err = {0};
    brisk_gnn_cache_result r = (brisk_gnn_cache_result)-1;
    if (brisk_gnn_graph_build(s, &fresh, &err)) {
        CHECKF(0, "build: %s", err.msg);
        return r;
    }
    if (brisk_gnn_graph_build_cached(s, dir, &c, &r, &err)) {
        CHECKF(0, "cached build: %s", err.msg);
    } else {
        CHECKF(graphs_equal(&fresh, &c), "cache result %d: the graph differs from a fresh build", (int)r);
        brisk_gnn_graph_free(&c);
    }
    brisk_gnn_graph_free(&fresh);
    return r;
}

static void test_cache(void) {
    char dir[] = "/tmp/brisk-gnn-cache-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    brisk_gnn_graph_spec s = {.grid_rows = 12, .grid_cols = 16, .mesh_rows = 6, .mesh_cols = 8, .k = 4, .neighbours = 8,
                              .metric = BRISK_GNN_SPHERE, .lat0 = 30, .lat1 = 60, .lon0 = -20, .lon1 = 25};
    CHECK(cached(&s, NULL) == BRISK_GNN_CACHE_OFF);
    CHECK(cached(&s, dir) == BRISK_GNN_CACHE_WRITTEN);
    CHECK(cached(&s, dir) == BRISK_GNN_CACHE_READ);
    brisk_gnn_graph_spec t = s;
    t.lon1 = 26; /* another domain: another file */
    CHECK(cached(&t, dir) == BRISK_GNN_CACHE_WRITTEN);
    CHECK(cached(&s, dir) == BRISK_GNN_CACHE_READ);
    /* damage the files (bytes in the features and positions: the checksum), then truncate them; rebuilt */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s/brisk-gnn-graph-*.bin", dir);
    FILE *ls = popen(cmd, "r");
    REQUIRE(ls != NULL);
    char path[512];
    int files = 0;
    while (fgets(path, sizeof path, ls)) {
        path[strcspn(path, "\n")] = 0;
        files++;
        FILE *f = fopen(path, "r+b");
        REQUIRE(f != NULL);
        fseek(f, -8, SEEK_END); /* inside the last edge features */
        fputc(0x7f, f);
        fseek(f, 200, SEEK_SET); /* in the grid positions or the first edges */
        for (int i = 0; i < 16; i++) fputc(0xff, f);
        fclose(f);
    }
    pclose(ls);
    CHECK(files == 2);
    CHECK(cached(&s, dir) == BRISK_GNN_CACHE_WRITTEN);
    CHECK(cached(&s, dir) == BRISK_GNN_CACHE_READ);
    snprintf(cmd, sizeof cmd, "for f in %s/brisk-gnn-graph-*.bin; do truncate -s -5 $f; done", dir);
    CHECK(system(cmd) == 0);
    CHECK(cached(&t, dir) == BRISK_GNN_CACHE_WRITTEN);
    CHECK(cached(&s, dir) == BRISK_GNN_CACHE_WRITTEN);
    CHECK(cached(&s, T_ABSENT "-brisk-dir") == BRISK_GNN_CACHE_UNWRITABLE);
    brisk_gnn_graph g;
    brisk_error err = {0};
    s.grid_rows = 2; /* refused by the build, through the cache too */
    CHECK(brisk_gnn_graph_build_cached(&s, dir, &g, NULL, &err) == BRISK_ERR_INVALID &&
          strstr(err.msg, "smaller than the mesh"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST_MAIN(T(test_plane), T(test_sphere), T(test_icosahedral), T(test_bad), T(test_cache))
