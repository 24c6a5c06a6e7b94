/* Validation metrics: accuracy, a confusion matrix and per-class precision and recall
 * for classification; mean absolute and root-mean-square error for regression. Summed
 * in batch order on the host, so they are the same for any thread count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "brisk/train.h"

void brisk_metrics_reset(brisk_val_metrics *m, int classes) {
    memset(m, 0, sizeof *m);
    m->classes = classes;
    m->loss = m->accuracy = m->mae = m->rmse = m->px_error = m->pck = NAN;
}

void brisk_metrics_add_keypoint(brisk_val_metrics *m, double dist_px, double side) {
    m->kp_n++;
    m->kp_px_sum += dist_px;
    m->kp_hits += dist_px <= BRISK_PCK_FRACTION * side;
}

void brisk_metrics_add_classes(brisk_val_metrics *m, const float *logits, const int32_t *labels, int64_t rows,
                               int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (logits[r * C + c] > logits[r * C + best]) best = c;
        int32_t y = labels[r];
        m->abs_sum += best == y; /* correct count */
        if (y >= 0 && y < C && C <= BRISK_MAX_CLASSES) m->confusion[y][best]++;
        m->n++;
    }
}

void brisk_metrics_add_values(brisk_val_metrics *m, const float *pred, const float *target, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double d = (double)pred[i] - target[i];
        m->abs_sum += fabs(d);
        m->sq_sum += d * d;
    }
    m->n += n;
}

void brisk_metrics_finish(brisk_val_metrics *m, double loss) {
    m->loss = loss;
    if (m->kp_n) m->px_error = m->kp_px_sum / (double)m->kp_n, m->pck = (double)m->kp_hits / (double)m->kp_n;
    if (m->n == 0) return;
    if (m->classes == 0) {
        m->mae = m->abs_sum / (double)m->n;
        m->rmse = sqrt(m->sq_sum / (double)m->n);
        return;
    }
    m->accuracy = m->abs_sum / (double)m->n;
    int C = m->classes <= BRISK_MAX_CLASSES ? m->classes : 0;
    for (int c = 0; c < C; c++) {
        int64_t tp = m->confusion[c][c], row = 0, col = 0;
        for (int k = 0; k < C; k++) row += m->confusion[c][k], col += m->confusion[k][c];
        m->precision[c] = col ? (double)tp / (double)col : NAN;
        m->recall[c] = row ? (double)tp / (double)row : NAN;
    }
}

/* "%.6g" or null for NaN, appended at *k. */
static void put_num(char *buf, size_t n, size_t *k, const char *prefix, double v) {
    if (*k >= n) return;
    *k += (size_t)snprintf(buf + *k, n - *k, isnan(v) ? "%snull" : "%s%.6g", prefix, v);
}

void brisk_metrics_json(const brisk_val_metrics *m, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    if (m->classes == 0) {
        put_num(buf, n, &k, ", \"val_mae\": ", m->mae);
        put_num(buf, n, &k, ", \"val_rmse\": ", m->rmse);
        if (m->kp_n) {
            put_num(buf, n, &k, ", \"val_px_error\": ", m->px_error);
            put_num(buf, n, &k, ", \"val_pck\": ", m->pck);
        }
        return;
    }
    put_num(buf, n, &k, ", \"val_accuracy\": ", m->accuracy);
    if (m->classes > BRISK_MAX_CLASSES) return;
    for (int part = 0; part < 2; part++) {
        const double *v = part ? m->recall : m->precision;
        for (int c = 0; c < m->classes; c++)
            put_num(buf, n, &k, c ? ", " : part ? "], \"val_recall\": [" : ", \"val_precision\": [", v[c]);
    }
    for (int r = 0; r < m->classes && k < n; r++)
        for (int c = 0; c < m->classes && k < n; c++)
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", c ? ", " : r ? "], [" : "], \"val_confusion\": [[",
                                  (long long)m->confusion[r][c]);
    if (k < n) snprintf(buf + k, n - k, "]]");
}

void brisk_metrics_log(const brisk_val_metrics *m, const brisk_logger *log) {
    if (m->classes == 0 && m->kp_n) {
        brisk_log(log, BRISK_LOG_INFO, "  val MAE %.6g, RMSE %.6g (fractions of the image), keypoint error %.4g px, "
                  "PCK@%g %.4f", m->mae, m->rmse, m->px_error, BRISK_PCK_FRACTION, m->pck);
        return;
    }
    if (m->classes == 0) {
        brisk_log(log, BRISK_LOG_INFO, "  val MAE %.6g, RMSE %.6g", m->mae, m->rmse);
        return;
    }
    if (m->classes > BRISK_MAX_CLASSES || m->n == 0) return;
    char line[64 + 12 * BRISK_MAX_CLASSES];
    size_t k = (size_t)snprintf(line, sizeof line, "  confusion (rows: true, cols: predicted) ");
    for (int c = 0; c < m->classes; c++) k += (size_t)snprintf(line + k, sizeof line - k, "%8d", c);
    brisk_log(log, BRISK_LOG_INFO, "%s   precision  recall", line);
    for (int r = 0; r < m->classes; r++) {
        k = (size_t)snprintf(line, sizeof line, "%40s%2d", "class ", r);
        for (int c = 0; c < m->classes; c++) k += (size_t)snprintf(line + k, sizeof line - k, "%8lld", (long long)m->confusion[r][c]);
        brisk_log(log, BRISK_LOG_INFO, "%s   %9.4f  %6.4f", line, m->precision[r], m->recall[r]);
    }
}
