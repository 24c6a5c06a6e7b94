/* The graphs of the mesh GNN (brisk_gnn_graph_build, see nn.h): node positions, the k
 * nearest grid <-> mesh pairs, the mesh's neighbour edges and the edge features, built once
 * at setup. The mesh is a coarser lattice over the domain, or for a global domain optionally
 * a refined icosahedron (nearly uniform nodes, none crowding at the poles). It lives in nn beside the model because it is the model's fixed structure
 * (sizes and k come from the model config); a reader only supplies coordinates.
 *
 * Nearest nodes are found by brute force over all pairs, in index order with a strict
 * comparison, so equal distances keep the lower index: O(grid x mesh), 4M distances for
 * the benchmark's 64x64 grid and 32x32 mesh (milliseconds), but too slow for a global
 * quarter-degree grid, which would need a spatial index. Distances are computed in
 * double: on the regular lattices here (power-of-two sizes) equal distances are then
 * exactly equal, so the choice among them is the index rule above, not rounding.
 * PyTorch's torch.cdist + topk in bench/reference/models.py breaks those ties by float32 rounding
 * instead, so its graph can differ from this one among equidistant nodes; the reference
 * test loads this graph into models.py's buffers. */
#include "brisk/nn.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEG (3.14159265358979323846 / 180.0)

typedef struct node_geo {
    double x, y;          /* the position features */
    double p[3];          /* sphere: unit vector */
    double east[3], north[3];
} node_geo;

static void geo_fill(const brisk_gnn_graph_spec *s, int64_t rows, int64_t cols, double off, node_geo *g,
                     float *pos) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            node_geo *n = &g[r * cols + c];
            /* float32 first, as models.py's grid_xy computes the positions */
            n->x = (float)(((float)c + (float)off) / (float)cols);
            n->y = (float)(((float)r + (float)off) / (float)rows);
            pos[(r * cols + c) * 2] = (float)n->x;
            pos[(r * cols + c) * 2 + 1] = (float)n->y;
            if (s->metric != BRISK_GNN_SPHERE) continue;
            double lat = (s->lat0 + (s->lat1 - s->lat0) * n->y) * DEG, lon = (s->lon0 + (s->lon1 - s->lon0) * n->x) * DEG;
            double cl = cos(lat), sl = sin(lat), co = cos(lon), so = sin(lon);
            n->p[0] = cl * co, n->p[1] = cl * so, n->p[2] = sl;
            n->east[0] = -so, n->east[1] = co, n->east[2] = 0;
            n->north[0] = -sl * co, n->north[1] = -sl * so, n->north[2] = cl;
        }
}

/* A node at unit vector v: position features (lon, lat) scaled to the domain as the
 * lattice's are, and the local east/north frame. */
static void geo_from_vec(const brisk_gnn_graph_spec *s, const double v[3], node_geo *n, float *pos) {
    double lat = asin(v[2] > 1 ? 1 : v[2] < -1 ? -1 : v[2]), lon = atan2(v[1], v[0]);
    double lon_deg = lon / DEG;
    while (lon_deg < s->lon0) lon_deg += 360;
    while (lon_deg >= s->lon0 + 360) lon_deg -= 360;
    n->x = (float)((lon_deg - s->lon0) / (s->lon1 - s->lon0));
    n->y = (float)((lat / DEG - s->lat0) / (s->lat1 - s->lat0));
    pos[0] = (float)n->x, pos[1] = (float)n->y;
    double cl = cos(lat), sl = sin(lat), co = cos(lon), so = sin(lon);
    memcpy(n->p, v, sizeof n->p);
    n->east[0] = -so, n->east[1] = co, n->east[2] = 0;
    n->north[0] = -sl * co, n->north[1] = -sl * so, n->north[2] = cl;
}

typedef struct mid_table { uint64_t *key; int32_t *val; size_t mask; } mid_table;

/* The vertex halfway along edge (a, b), made (and remembered) on first use. */
static int32_t midpoint(mid_table *t, double (*v)[3], int32_t *nv, int32_t a, int32_t b) {
    uint64_t key = a < b ? ((uint64_t)a << 32 | (uint32_t)b) : ((uint64_t)b << 32 | (uint32_t)a);
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & t->mask;
    while (t->key[i] != UINT64_MAX && t->key[i] != key) i = (i + 1) & t->mask;
    if (t->key[i] == key) return t->val[i];
    double m[3] = {v[a][0] + v[b][0], v[a][1] + v[b][1], v[a][2] + v[b][2]};
    double r = sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
    int32_t id = (*nv)++;
    for (int k = 0; k < 3; k++) v[id][k] = m[k] / r;
    t->key[i] = key, t->val[i] = id;
    return id;
}

/* The icosahedron refined r times (each triangle into four, new vertices pushed out to the
 * sphere): 10 * 4^r + 2 nodes in a fixed order, the 12 corners first. */
static brisk_status ico_fill(const brisk_gnn_graph_spec *s, int r, node_geo *g, float *pos, brisk_error *err) {
    const double phi = (1.0 + sqrt(5.0)) / 2.0;
    static const int f0[20][3] = {{0, 11, 5}, {0, 5, 1},  {0, 1, 7},   {0, 7, 10}, {0, 10, 11}, {1, 5, 9}, {5, 11, 4},
                                  {11, 10, 2}, {10, 7, 6}, {7, 1, 8},  {3, 9, 4},  {3, 4, 2},   {3, 2, 6}, {3, 6, 8},
                                  {3, 8, 9},  {4, 9, 5},  {2, 4, 11}, {6, 2, 10}, {8, 6, 7},   {9, 8, 1}};
    const double c0[12][3] = {{-1, phi, 0}, {1, phi, 0}, {-1, -phi, 0}, {1, -phi, 0}, {0, -1, phi}, {0, 1, phi},
                              {0, -1, -phi}, {0, 1, -phi}, {phi, 0, -1}, {phi, 0, 1}, {-phi, 0, -1}, {-phi, 0, 1}};
    int64_t nm = 10 * ((int64_t)1 << (2 * r)) + 2, nf = 20 * ((int64_t)1 << (2 * r));
    double (*v)[3] = malloc((size_t)nm * sizeof *v);
    int32_t (*f)[3] = malloc((size_t)nf * sizeof *f), (*nfc)[3] = malloc((size_t)nf * sizeof *nfc);
    size_t cap = 1;
    while (cap < (size_t)nf * 2) cap <<= 1; /* > the 1.5 nf edges of the last level */
    mid_table t = {malloc(cap * sizeof *t.key), malloc(cap * sizeof *t.val), cap - 1};
    brisk_status st = BRISK_OK;
    if (!v || !f || !nfc || !t.key || !t.val) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "mesh graph: out of memory for an icosahedral mesh of %lld nodes",
                          (long long)nm);
        goto done;
    }
    int32_t n_v = 12;
    int64_t n_f = 20;
    for (int i = 0; i < 12; i++) {
        double l = sqrt(c0[i][0] * c0[i][0] + c0[i][1] * c0[i][1] + c0[i][2] * c0[i][2]);
        for (int k = 0; k < 3; k++) v[i][k] = c0[i][k] / l;
    }
    for (int i = 0; i < 20; i++) memcpy(f[i], f0[i], sizeof f[i]);
    for (int level = 0; level < r; level++) {
        memset(t.key, 0xFF, cap * sizeof *t.key);
        for (int64_t i = 0; i < n_f; i++) {
            int32_t a = f[i][0], b = f[i][1], c = f[i][2];
            int32_t ab = midpoint(&t, v, &n_v, a, b), bc = midpoint(&t, v, &n_v, b, c), ca = midpoint(&t, v, &n_v, c, a);
            int32_t q[4][3] = {{a, ab, ca}, {b, bc, ab}, {c, ca, bc}, {ab, bc, ca}};
            memcpy(nfc[4 * i], q, sizeof q);
        }
        n_f *= 4;
        int32_t (*sw)[3] = f;
        f = nfc, nfc = sw;
    }
    for (int64_t i = 0; i < nm; i++) geo_from_vec(s, v[i], &g[i], pos + 2 * i);
done:
    free(v);
    free(f);
    free(nfc);
    free(t.key);
    free(t.val);
    return st;
}

int64_t brisk_gnn_mesh_nodes(const brisk_gnn_graph_spec *s) {
    if (s->icosahedral >= 1 && s->icosahedral <= 8) return 10 * ((int64_t)1 << (2 * (s->icosahedral - 1))) + 2;
    return s->mesh_rows * s->mesh_cols;
}

/* A monotone key of the distance (squared chord on the sphere, squared distance in the
 * plane): cheap, and it orders pairs as the distance does. */
static double dkey(const brisk_gnn_graph_spec *s, const node_geo *a, const node_geo *b) {
    if (s->metric == BRISK_GNN_SPHERE) {
        double d0 = a->p[0] - b->p[0], d1 = a->p[1] - b->p[1], d2 = a->p[2] - b->p[2];
        return d0 * d0 + d1 * d1 + d2 * d2;
    }
    double dx = a->x - b->x, dy = a->y - b->y;
    return dx * dx + dy * dy;
}

/* The k nearest of cand[0, n) to q (skipping index `skip`), nearest first, into out[k]. */
static void k_nearest(const brisk_gnn_graph_spec *s, const node_geo *q, const node_geo *cand, int64_t n,
                      int64_t skip, int k, int32_t *out, double *best) {
    int have = 0;
    for (int64_t j = 0; j < n; j++) {
        if (j == skip) continue;
        double d = dkey(s, q, &cand[j]);
        if (have == k && d >= best[k - 1]) continue;
        int i = have < k ? have++ : k - 1;
        while (i > 0 && best[i - 1] > d) { best[i] = best[i - 1]; out[i] = out[i - 1]; i--; }
        best[i] = d;
        out[i] = (int32_t)j;
    }
}

static void edge_feat(const brisk_gnn_graph_spec *s, const node_geo *a, const node_geo *b, float *f) {
    if (s->metric == BRISK_GNN_SPHERE) { /* b is the receiver: its local east/north frame */
        double d[3] = {b->p[0] - a->p[0], b->p[1] - a->p[1], b->p[2] - a->p[2]};
        double chord = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        f[0] = (float)(d[0] * b->east[0] + d[1] * b->east[1] + d[2] * b->east[2]);
        f[1] = (float)(d[0] * b->north[0] + d[1] * b->north[1] + d[2] * b->north[2]);
        f[2] = (float)(2.0 * asin(chord > 2.0 ? 1.0 : chord / 2.0));
        return;
    }
    float dx = (float)b->x - (float)a->x, dy = (float)b->y - (float)a->y;
    f[0] = dx;
    f[1] = dy;
    f[2] = sqrtf(dx * dx + dy * dy);
}

static brisk_status edges_alloc(brisk_gnn_edges *e, int64_t n, brisk_error *err) {
    e->n = n;
    e->src = malloc((size_t)n * sizeof(int32_t));
    e->dst = malloc((size_t)n * sizeof(int32_t));
    e->feat = malloc((size_t)n * 3 * sizeof(float));
    if (!e->src || !e->dst || !e->feat)
        return brisk_errorf(err, BRISK_ERR_NOMEM, "mesh graph: out of memory for %lld edges", (long long)n);
    return BRISK_OK;
}

static brisk_status check_spec(const brisk_gnn_graph_spec *s, brisk_error *err) {
    const int64_t lim = 1 << 24;
    if (s->icosahedral) {
        if (s->icosahedral < 1 || s->icosahedral > 8)
            return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: icosahedral refinement %d (expected 0 to 7)",
                                s->icosahedral - 1);
        if (s->metric != BRISK_GNN_SPHERE || s->lat0 != -90 || s->lat1 != 90 || s->lon1 - s->lon0 != 360)
            return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: an icosahedral mesh needs the sphere metric over the "
                                "globe (lat [-90, 90], a lon span of 360), got lat [%g, %g], lon [%g, %g]", s->lat0, s->lat1,
                                s->lon0, s->lon1);
    }
    int64_t mr = s->icosahedral ? 1 : s->mesh_rows, mc = s->icosahedral ? 1 : s->mesh_cols;
    if (s->grid_rows < 1 || s->grid_cols < 1 || mr < 1 || mc < 1 || s->grid_rows > lim || s->grid_cols > lim ||
        mr > lim || mc > lim)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: grid %lldx%lld, mesh %lldx%lld (expected sizes 1 to %lld)",
                            (long long)s->grid_rows, (long long)s->grid_cols, (long long)s->mesh_rows,
                            (long long)s->mesh_cols, (long long)lim);
    if (s->grid_rows < mr || s->grid_cols < mc)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: the grid (%lldx%lld) is smaller than the mesh (%lldx%lld)",
                            (long long)s->grid_rows, (long long)s->grid_cols, (long long)s->mesh_rows,
                            (long long)s->mesh_cols);
    int64_t ng = s->grid_rows * s->grid_cols, nm = brisk_gnn_mesh_nodes(s);
    if (s->icosahedral && ng < nm)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: the grid (%lldx%lld, %lld nodes) is smaller than the "
                            "icosahedral mesh (%lld nodes)", (long long)s->grid_rows, (long long)s->grid_cols,
                            (long long)ng, (long long)nm);
    if (s->k < 1 || s->k > nm || s->k > 64)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: k = %d (expected 1 to %lld, the mesh nodes, and at most 64)",
                            s->k, (long long)(nm < 64 ? nm : 64));
    if (s->neighbours < 1 || s->neighbours > nm - 1 || s->neighbours > 64)
        return brisk_errorf(err, BRISK_ERR_INVALID,
                            "mesh graph: neighbours = %d (expected 1 to %lld: fewer than the mesh nodes, at most 64)",
                            s->neighbours, (long long)(nm - 1 < 64 ? nm - 1 : 64));
    if (ng * s->k > INT32_MAX || nm * s->neighbours > INT32_MAX)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: %lld grid nodes x k %d edges is too many", (long long)ng, s->k);
    if (s->metric == BRISK_GNN_SPHERE &&
        !(s->lat0 >= -90 && s->lat1 <= 90 && s->lat0 < s->lat1 && s->lon0 < s->lon1 && s->lon1 - s->lon0 <= 360))
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: domain lat [%g, %g], lon [%g, %g] (expected -90 <= lat0 < "
                            "lat1 <= 90 and lon0 < lon1 <= lon0 + 360)", s->lat0, s->lat1, s->lon0, s->lon1);
    if (s->metric != BRISK_GNN_PLANE && s->metric != BRISK_GNN_SPHERE)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mesh graph: unknown metric %d", (int)s->metric);
    return BRISK_OK;
}

brisk_status brisk_gnn_graph_build(const brisk_gnn_graph_spec *s, brisk_gnn_graph *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    brisk_status st = check_spec(s, err);
    if (st) return st;
    int64_t ng = s->grid_rows * s->grid_cols, nm = brisk_gnn_mesh_nodes(s);
    int k = s->k, nb = s->neighbours;
    out->n_grid = ng, out->n_mesh = nm;
    node_geo *gg = malloc((size_t)ng * sizeof *gg), *mg = malloc((size_t)nm * sizeof *mg);
    int32_t *near = malloc((size_t)ng * (size_t)k * sizeof(int32_t));
    int64_t *count = calloc((size_t)nm + 1, sizeof(int64_t));
    out->grid_pos = malloc((size_t)ng * 2 * sizeof(float));
    out->mesh_pos = malloc((size_t)nm * 2 * sizeof(float));
    if (!gg || !mg || !near || !count || !out->grid_pos || !out->mesh_pos) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "mesh graph: out of memory for %lld grid nodes", (long long)ng);
        goto done;
    }
    geo_fill(s, s->grid_rows, s->grid_cols, 0.0, gg, out->grid_pos);
    if (s->icosahedral) {
        if ((st = ico_fill(s, s->icosahedral - 1, mg, out->mesh_pos, err))) goto done;
    } else {
        geo_fill(s, s->mesh_rows, s->mesh_cols, 0.5, mg, out->mesh_pos);
    }
    double best[65];
    for (int64_t i = 0; i < ng; i++) k_nearest(s, &gg[i], mg, nm, -1, k, near + i * k, best);
    if ((st = edges_alloc(&out->g2m, ng * k, err)) || (st = edges_alloc(&out->m2g, ng * k, err)) ||
        (st = edges_alloc(&out->mm, nm * nb, err)))
        goto done;
    /* grid -> mesh, ordered by mesh node (a stable counting sort keeps grid order) */
    for (int64_t e = 0; e < ng * k; e++) count[near[e] + 1]++;
    for (int64_t m = 0; m < nm; m++) count[m + 1] += count[m];
    for (int64_t e = 0; e < ng * k; e++) {
        int64_t at = count[near[e]]++, gi = e / k;
        out->g2m.src[at] = (int32_t)gi;
        out->g2m.dst[at] = near[e];
        edge_feat(s, &gg[gi], &mg[near[e]], out->g2m.feat + at * 3);
    }
    /* mesh -> grid: already ordered by grid node */
    for (int64_t e = 0; e < ng * k; e++) {
        int64_t gi = e / k;
        out->m2g.src[e] = near[e];
        out->m2g.dst[e] = (int32_t)gi;
        edge_feat(s, &mg[near[e]], &gg[gi], out->m2g.feat + e * 3);
    }
    /* mesh -> mesh: into each mesh node from its nearest others */
    for (int64_t m = 0; m < nm; m++) {
        k_nearest(s, &mg[m], mg, nm, m, nb, out->mm.src + m * nb, best);
        for (int j = 0; j < nb; j++) {
            int64_t e = m * nb + j;
            out->mm.dst[e] = (int32_t)m;
            edge_feat(s, &mg[out->mm.src[e]], &mg[m], out->mm.feat + e * 3);
        }
    }
done:
    free(gg);
    free(mg);
    free(near);
    free(count);
    if (st) brisk_gnn_graph_free(out);
    return st;
}

static void edges_free(brisk_gnn_edges *e) {
    free(e->src);
    free(e->dst);
    free(e->feat);
    memset(e, 0, sizeof *e);
}

void brisk_gnn_graph_free(brisk_gnn_graph *g) {
    if (!g) return;
    free(g->grid_pos);
    free(g->mesh_pos);
    edges_free(&g->g2m);
    edges_free(&g->mm);
    edges_free(&g->m2g);
    memset(g, 0, sizeof *g);
}
