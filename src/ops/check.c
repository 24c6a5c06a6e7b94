/* Input checks and NumPy broadcasting shared by the op builders (declared in
 * ops/ops_internal.h). */
#include "ops/ops_internal.h"

#include <string.h>

int brisk_ops_check(brisk_graph *g, const char *op, const int *ids, int n) {
    if (!g || g->err.code != BRISK_OK) return -1;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= g->n_nodes)
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: input %d (%d) is not a node", op, i,
                                    ids[i]);
    return 0;
}

int brisk_ops_check_dtype(brisk_graph *g, const char *op, const int *ids, int n, brisk_dtype dt) {
    if (brisk_ops_check(g, op, ids, n)) return -1;
    for (int i = 0; i < n; i++) {
        const brisk_node *x = &g->nodes[ids[i]];
        if (x->dtype != dt) {
            char buf[BRISK_SHAPE_STR];
            return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: input %d %s %s, expected %s", op, i,
                                    brisk_dtype_name(x->dtype), brisk_shape_str(&x->shape, buf, sizeof buf),
                                    brisk_dtype_name(dt));
        }
    }
    return 0;
}

int brisk_ops_broadcasts_to(const brisk_shape *from, const brisk_shape *to) {
    brisk_shape r;
    return brisk_shape_broadcast(from, to, &r) == 0 && brisk_shape_equal(&r, to);
}
