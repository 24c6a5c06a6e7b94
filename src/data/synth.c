/* Synthetic example datasets with learnable structure, generated from a seed with
 * Philox: every sample is a pure function of (seed, sample index), so any n gives the
 * same first samples. Philox counters here: {sample lo, sample hi, stream, block}. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/synth_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    FINE = 256, COARSE = 7,   /* diffusion: fine field and its block means */
    FEAT = 64, HID = 32, CLS = 3, /* tabular: features, teacher hidden width, classes */
};
enum {
    S_ANCHOR = 1, S_FINE_NOISE, S_X, S_LABEL_NOISE, S_TEACHER, S_CALIB,
};

static void normals(uint64_t key64, uint64_t sample, uint32_t stream, float *out, int n) {
    brisk_philox_normals(key64, sample, stream, out, n);
}

/* Block k of the fine grid is [k*FINE/COARSE, (k+1)*FINE/COARSE): uneven, as 256 = 7*36+4. */
static int block_start(int k) { return k * FINE / COARSE; }

/* ---------------------------------------------------------------- diffusion */

static void diffusion_sample(uint64_t seed, uint64_t s, float *fine, float *coarse) {
    float a[8], noise[FINE];
    normals(seed, s, S_ANCHOR, a, 8);
    normals(seed, s, S_FINE_NOISE, noise, FINE);
    /* The large scale: Catmull-Rom through the 7 anchors placed at block centres. */
    float centre[COARSE];
    for (int k = 0; k < COARSE; k++) centre[k] = 0.5f * (float)(block_start(k) + block_start(k + 1));
    /* The small scale depends on the coarse values (so coarse conditions it): a wave whose
     * wavenumber is set by the anchors' spread, phase by their tilt, and amplitude by
     * the local large-scale value. */
    float mean = 0, spread = 0;
    for (int k = 0; k < COARSE; k++) mean += a[k] / COARSE;
    for (int k = 0; k < COARSE; k++) spread += fabsf(a[k] - mean) / COARSE;
    float waves = 10.0f + 6.0f * tanhf(spread - 0.8f);
    float phase = 3.14159265f * tanhf(a[COARSE - 1] - a[0]) + 0.3f * a[7];
    for (int i = 0; i < FINE; i++) {
        float x = (float)i + 0.5f;
        int k = 0;
        while (k < COARSE - 1 && x > centre[k + 1]) k++;
        float t;
        int k0, k1;
        if (x <= centre[0]) { k0 = k1 = 0; t = 0; }
        else if (x >= centre[COARSE - 1]) { k0 = k1 = COARSE - 1; t = 0; }
        else { k0 = k; k1 = k + 1; t = (x - centre[k0]) / (centre[k1] - centre[k0]); }
        float p0 = a[k0 > 0 ? k0 - 1 : 0], p1 = a[k0], p2 = a[k1], p3 = a[k1 < COARSE - 1 ? k1 + 1 : COARSE - 1];
        float base = 0.5f * ((2 * p1) + (-p0 + p2) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t * t +
                             (-p0 + 3 * p1 - 3 * p2 + p3) * t * t * t);
        float amp = 0.15f + 0.25f / (1.0f + expf(-2.0f * base));
        float small = amp * sinf(6.28318531f * waves * x / FINE + phase);
        fine[i] = base + small + 0.05f * noise[i];
    }
    for (int k = 0; k < COARSE; k++) {
        double sum = 0;
        for (int i = block_start(k); i < block_start(k + 1); i++) sum += fine[i];
        coarse[k] = (float)(sum / (block_start(k + 1) - block_start(k)));
    }
}

/* ---------------------------------------------------------------- tabular */

/* The teacher: a fixed random tanh network, the same for every seed (so train and test
 * sets drawn with different seeds share one labelling function). */
typedef struct teacher {
    float w1[FEAT * HID], b1[HID], w2[HID * CLS], shift[CLS];
} teacher;

static void teacher_logits(const teacher *T, const float *x, float *logit) {
    float h[HID];
    for (int j = 0; j < HID; j++) {
        float s = T->b1[j];
        for (int i = 0; i < FEAT; i++) s += x[i] * T->w1[i * HID + j];
        h[j] = tanhf(s);
    }
    for (int c = 0; c < CLS; c++) {
        float s = -T->shift[c];
        for (int j = 0; j < HID; j++) s += h[j] * T->w2[j * CLS + c];
        logit[c] = s;
    }
}

static int argmax3(const float *v) { return v[1] > v[0] ? (v[2] > v[1] ? 2 : 1) : (v[2] > v[0] ? 2 : 0); }

static void teacher_make(teacher *T) {
    const uint64_t key = 0x7461627574656163ull; /* fixed: independent of the data seed */
    normals(key, 0, S_TEACHER, T->w1, FEAT * HID);
    normals(key, 1, S_TEACHER, T->b1, HID);
    normals(key, 2, S_TEACHER, T->w2, HID * CLS);
    for (int i = 0; i < FEAT * HID; i++) T->w1[i] *= 1.5f / sqrtf((float)FEAT);
    for (int j = 0; j < HID; j++) T->b1[j] *= 0.5f;
    for (int i = 0; i < HID * CLS; i++) T->w2[i] /= sqrtf((float)HID);
    memset(T->shift, 0, sizeof T->shift);
    /* Centre each class's logit on a fixed calibration sample, which roughly balances
     * the classes (a random network alone can favour one heavily). */
    double mean[CLS] = {0};
    enum { CAL = 2048 };
    for (int s = 0; s < CAL; s++) {
        float x[FEAT], l[CLS];
        normals(key, (uint64_t)s, S_CALIB, x, FEAT);
        teacher_logits(T, x, l);
        for (int c = 0; c < CLS; c++) mean[c] += l[c] / CAL;
    }
    for (int c = 0; c < CLS; c++) T->shift[c] = (float)mean[c];
}

static void tabular_sample(const teacher *T, uint64_t seed, uint64_t s, float *x, int32_t *y) {
    normals(seed, s, S_X, x, FEAT);
    float l[CLS];
    teacher_logits(T, x, l);
    int label = argmax3(l);
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {(uint32_t)s, (uint32_t)(s >> 32), S_LABEL_NOISE, 0};
    uint32_t u[4];
    brisk_philox4x32(ctr, key, u);
    if (brisk_u32_to_unit(u[0]) <= 0.05f) label = (label + 1 + (int)(u[1] & 1)) % CLS; /* a different class */
    *y = label;
}

/* ---------------------------------------------------------------- API */

brisk_status brisk_synth_make(const char *kind, int64_t n, uint64_t seed, brisk_dataset *ds, brisk_error *err) {
    memset(ds, 0, sizeof *ds);
    snprintf(ds->source, sizeof ds->source, "synthetic '%s'", kind ? kind : "?");
    if (n < 1 || n > ((int64_t)1 << 40))
        return brisk_errorf(err, BRISK_ERR_INVALID, "synth: %lld samples; expected 1 to 2^40", (long long)n);
    brisk_tensor a, b;
    brisk_status st;
    memset(&b, 0, sizeof b);
    if (kind && strcmp(kind, "diffusion") == 0) {
        if ((st = brisk_tensor_alloc(&a, BRISK_F32, brisk_shape2(n, FINE), err))) return st;
        if ((st = brisk_tensor_alloc(&b, BRISK_F32, brisk_shape2(n, COARSE), err))) { brisk_tensor_free(&a); return st; }
        for (int64_t s = 0; s < n; s++)
            diffusion_sample(seed, (uint64_t)s, (float *)a.data + s * FINE, (float *)b.data + s * COARSE);
        if ((st = brisk_dataset_add(ds, "fine", &a, err))) { brisk_tensor_free(&b); return st; }
        if ((st = brisk_dataset_add(ds, "coarse", &b, err))) { brisk_dataset_free(ds); return st; }
        return BRISK_OK;
    }
    if (kind && strcmp(kind, "tabular") == 0) {
        teacher *T = malloc(sizeof *T);
        if (!T) return brisk_errorf(err, BRISK_ERR_NOMEM, "synth: out of memory");
        teacher_make(T);
        if ((st = brisk_tensor_alloc(&a, BRISK_F32, brisk_shape2(n, FEAT), err))) { free(T); return st; }
        if ((st = brisk_tensor_alloc(&b, BRISK_I32, brisk_shape1(n), err))) { free(T); brisk_tensor_free(&a); return st; }
        for (int64_t s = 0; s < n; s++)
            tabular_sample(T, seed, (uint64_t)s, (float *)a.data + s * FEAT, (int32_t *)b.data + s);
        free(T);
        if ((st = brisk_dataset_add(ds, "x", &a, err))) { brisk_tensor_free(&b); return st; }
        if ((st = brisk_dataset_add(ds, "y", &b, err))) { brisk_dataset_free(ds); return st; }
        return BRISK_OK;
    }
    if (kind && strcmp(kind, "series") == 0) {
        brisk_status s2 = brisk_synth_series(n, seed, ds, err);
        if (s2) brisk_dataset_free(ds);
        return s2;
    }
    return brisk_errorf(err, BRISK_ERR_INVALID, "synth: unknown kind '%s'; expected 'diffusion', 'tabular' or 'series' (image "
                        "folders and NetCDF files: brisk_synth_images, brisk_synth_weather)",
                        kind ? kind : "(null)");
}

/* A dataset of equally long 1-D fields as CSV columns (header = field names). */
static brisk_status write_csv(const char *path, const brisk_dataset *ds, brisk_error *err) {
    brisk_out o;
    brisk_status st = brisk_out_open(&o, path, err);
    if (st) return st;
    FILE *f = o.fp;
    for (int c = 0; c < ds->nfields; c++) fprintf(f, "%s%s", c ? "," : "", ds->fields[c].name);
    fputc('\n', f);
    for (int64_t r = 0; r < ds->count; r++)
        for (int c = 0; c < ds->nfields; c++) {
            const brisk_tensor *t = &ds->fields[c].tensor;
            if (t->dtype == BRISK_F32) fprintf(f, "%.9g", (double)((const float *)t->data)[r]);
            else fprintf(f, "%d", ((const int32_t *)t->data)[r]);
            fputc(c + 1 < ds->nfields ? ',' : '\n', f);
        }
    return brisk_out_commit(&o, err);
}

brisk_status brisk_synth_write(const char *kind, const char *path, int64_t n, uint64_t seed, brisk_error *err) {
    brisk_dataset ds;
    brisk_status st = brisk_synth_make(kind, n, seed, &ds, err);
    if (st) return st;
    size_t len = strlen(path);
    if (len >= 4 && strcmp(path + len - 4, ".csv") == 0) {
        int flat = 1;
        for (int i = 0; i < ds.nfields; i++) flat &= ds.fields[i].tensor.shape.ndim == 1;
        st = flat ? write_csv(path, &ds, err)
                  : brisk_errorf(err, BRISK_ERR_INVALID, "%s: '%s' has multi-column fields; write it as .npz", path, kind);
        brisk_dataset_free(&ds);
        return st;
    }
    const char *names[64];
    brisk_tensor ts[64];
    for (int i = 0; i < ds.nfields && i < 64; i++) {
        names[i] = ds.fields[i].name;
        ts[i] = ds.fields[i].tensor;
    }
    st = brisk_npz_write(path, ds.nfields < 64 ? ds.nfields : 64, names, ts, err);
    brisk_dataset_free(&ds);
    return st;
}
