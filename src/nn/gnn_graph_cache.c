/* The mesh GNN's graph cached in a file (brisk_gnn_graph_build_cached, see nn.h), so that a
 * run over the same domain does not redo the O(grid x mesh) nearest-node search at setup.
 *
 * The file is named by a 64-bit FNV-1a hash of the spec's fields (each written out as a
 * fixed-width value, never the struct's padding), and holds that canonical spec again, so a
 * hash collision or a file renamed by hand is noticed, then the sizes and the arrays in
 * native byte order (a byte-order mark refuses a file from another machine), then an FNV-1a
 * checksum of all of it. Anything that does not match (short, wrong spec, wrong checksum,
 * indices out of range, receivers not sorted) is not an
 * error: the graph is built again and the file replaced. It is written to a temporary name
 * and renamed, so callers in parallel (the data side and the model) never read half a file. */
#include "brisk/nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "BRSKGNN1"
#define BOM 0x01020304u
#define SPEC_WORDS 12

/* The spec as fixed-width words: every field, doubles by their bits. */
static void spec_words(const brisk_gnn_graph_spec *s, uint64_t w[SPEC_WORDS]) {
    double d[4] = {s->lat0, s->lat1, s->lon0, s->lon1};
    w[0] = (uint64_t)s->grid_rows, w[1] = (uint64_t)s->grid_cols, w[2] = (uint64_t)s->mesh_rows;
    w[3] = (uint64_t)s->mesh_cols, w[4] = (uint64_t)(int64_t)s->k, w[5] = (uint64_t)(int64_t)s->neighbours;
    w[6] = (uint64_t)s->metric;
    for (int i = 0; i < 4; i++) memcpy(&w[7 + i], &d[i], 8);
    w[11] = (uint64_t)(int64_t)s->icosahedral;
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int path_for(const char *dir, const brisk_gnn_graph_spec *s, char *path, size_t size) {
    uint64_t w[SPEC_WORDS];
    spec_words(s, w);
    uint64_t h = fnv1a(w, sizeof w, 0xcbf29ce484222325ull);
    int n = snprintf(path, size, "%s/brisk-gnn-graph-%016llx.bin", dir, (unsigned long long)h);
    return n > 0 && (size_t)n < size;
}

typedef struct header {
    char magic[8];
    uint32_t bom, pad;
    uint64_t spec[SPEC_WORDS];
    int64_t n_grid, n_mesh, e_g2m, e_mm, e_m2g;
} header;

static uint64_t edges_hash(const brisk_gnn_edges *e, uint64_t h) {
    h = fnv1a(e->src, (size_t)e->n * 4, h);
    h = fnv1a(e->dst, (size_t)e->n * 4, h);
    return fnv1a(e->feat, (size_t)e->n * 12, h);
}

/* The checksum of the header and every array. */
static uint64_t graph_hash(const header *hd, const brisk_gnn_graph *g) {
    uint64_t h = fnv1a(hd, sizeof *hd, 0xcbf29ce484222325ull);
    h = fnv1a(g->grid_pos, (size_t)g->n_grid * 8, h);
    h = fnv1a(g->mesh_pos, (size_t)g->n_mesh * 8, h);
    return edges_hash(&g->m2g, edges_hash(&g->mm, edges_hash(&g->g2m, h)));
}

static int write_edges(FILE *f, const brisk_gnn_edges *e) {
    size_t n = (size_t)e->n;
    return fwrite(e->src, 4, n, f) == n && fwrite(e->dst, 4, n, f) == n && fwrite(e->feat, 4, 3 * n, f) == 3 * n;
}

static int write_file(const char *path, const header *h, const brisk_gnn_graph *g) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) return 0;
    FILE *f = fopen(tmp, "wb");
    if (!f) return 0;
    int ok = fwrite(h, sizeof *h, 1, f) == 1 &&
             fwrite(g->grid_pos, 4, (size_t)(2 * g->n_grid), f) == (size_t)(2 * g->n_grid) &&
             fwrite(g->mesh_pos, 4, (size_t)(2 * g->n_mesh), f) == (size_t)(2 * g->n_mesh) &&
             write_edges(f, &g->g2m) && write_edges(f, &g->mm) && write_edges(f, &g->m2g);
    uint64_t sum = graph_hash(h, g);
    ok = ok && fwrite(&sum, 8, 1, f) == 1;
    ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) remove(tmp);
    return ok;
}

/* Reads n edges whose source lies in [0, ns) and destination in [0, nd), non-decreasing. */
static int read_edges(FILE *f, brisk_gnn_edges *e, int64_t n, int64_t ns, int64_t nd) {
    if (n < 0 || n > (int64_t)1 << 31) return 0;
    e->n = n;
    e->src = malloc((size_t)n * 4 + 4), e->dst = malloc((size_t)n * 4 + 4), e->feat = malloc((size_t)n * 12 + 4);
    if (!e->src || !e->dst || !e->feat || fread(e->src, 4, (size_t)n, f) != (size_t)n ||
        fread(e->dst, 4, (size_t)n, f) != (size_t)n || fread(e->feat, 4, (size_t)(3 * n), f) != (size_t)(3 * n))
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (e->src[i] < 0 || e->src[i] >= ns || e->dst[i] < 0 || e->dst[i] >= nd || (i && e->dst[i] < e->dst[i - 1]))
            return 0;
    return 1;
}

static int read_file(const char *path, const header *want, brisk_gnn_graph *g) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    header h;
    memset(g, 0, sizeof *g);
    int ok = fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, MAGIC, 8) == 0 && h.bom == BOM &&
             memcmp(h.spec, want->spec, sizeof h.spec) == 0 && h.n_grid == want->n_grid && h.n_mesh == want->n_mesh &&
             h.e_g2m == want->e_g2m && h.e_mm == want->e_mm && h.e_m2g == want->e_m2g;
    if (ok) {
        g->n_grid = h.n_grid, g->n_mesh = h.n_mesh;
        g->grid_pos = malloc((size_t)(2 * h.n_grid) * 4 + 4), g->mesh_pos = malloc((size_t)(2 * h.n_mesh) * 4 + 4);
        ok = g->grid_pos && g->mesh_pos && fread(g->grid_pos, 4, (size_t)(2 * h.n_grid), f) == (size_t)(2 * h.n_grid) &&
             fread(g->mesh_pos, 4, (size_t)(2 * h.n_mesh), f) == (size_t)(2 * h.n_mesh) &&
             read_edges(f, &g->g2m, h.e_g2m, h.n_grid, h.n_mesh) && read_edges(f, &g->mm, h.e_mm, h.n_mesh, h.n_mesh) &&
             read_edges(f, &g->m2g, h.e_m2g, h.n_mesh, h.n_grid);
        uint64_t sum = 0;
        ok = ok && fread(&sum, 8, 1, f) == 1 && fgetc(f) == EOF && sum == graph_hash(&h, g);
    }
    fclose(f);
    if (!ok) brisk_gnn_graph_free(g);
    return ok;
}

brisk_status brisk_gnn_graph_build_cached(const brisk_gnn_graph_spec *spec, const char *dir, brisk_gnn_graph *out,
                                          brisk_gnn_cache_result *result, brisk_error *err) {
    if (result) *result = BRISK_GNN_CACHE_OFF;
    char path[4096];
    /* a spec the build refuses (or whose sizes would overflow here) gets the build's error */
    int sane = spec->grid_rows > 0 && spec->grid_cols > 0 && spec->mesh_rows > 0 && spec->mesh_cols > 0 &&
               spec->grid_rows <= 1 << 20 && spec->grid_cols <= 1 << 20 && spec->mesh_rows <= 1 << 20 &&
               spec->mesh_cols <= 1 << 20 && spec->k >= 1 && spec->k <= 64 && spec->neighbours >= 1 &&
               spec->neighbours <= 64 && spec->icosahedral >= 0 && spec->icosahedral <= 8;
    if (!dir || !*dir || !sane) return brisk_gnn_graph_build(spec, out, err);
    if (!path_for(dir, spec, path, sizeof path))
        return brisk_errorf(err, BRISK_ERR_INVALID, "graph cache: directory name too long: %s", dir);
    header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.bom = BOM;
    spec_words(spec, h.spec);
    /* the sizes a valid build has; the spec is checked by the build itself */
    h.n_grid = spec->grid_rows * spec->grid_cols, h.n_mesh = brisk_gnn_mesh_nodes(spec);
    h.e_g2m = h.e_m2g = h.n_grid * spec->k, h.e_mm = h.n_mesh * spec->neighbours;
    if (read_file(path, &h, out)) {
        if (result) *result = BRISK_GNN_CACHE_READ;
        return BRISK_OK;
    }
    brisk_status st = brisk_gnn_graph_build(spec, out, err);
    if (st) return st;
    int wrote = out->n_grid == h.n_grid && out->n_mesh == h.n_mesh && out->g2m.n == h.e_g2m && out->mm.n == h.e_mm &&
                out->m2g.n == h.e_m2g && write_file(path, &h, out);
    if (result) *result = wrote ? BRISK_GNN_CACHE_WRITTEN : BRISK_GNN_CACHE_UNWRITABLE;
    return BRISK_OK;
}
