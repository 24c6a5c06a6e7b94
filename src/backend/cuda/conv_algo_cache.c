/* The cuDNN convolution algorithm cache file (conv_algo_cache.h): keys, strict parsing,
 * atomic rewrite. Built in every build, GPU or not. */
#include "backend/cuda/conv_algo_cache.h"
#include "brisk/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void conv_cache_path_beside(const char *gemm_path, char *out, size_t out_size) {
    if (!out_size) return;
    out[0] = 0;
    if (!gemm_path || !gemm_path[0]) return;
    const char *slash = strrchr(gemm_path, '/');
    if (!slash) snprintf(out, out_size, "%s", CONV_CACHE_FILE);
    else snprintf(out, out_size, "%.*s/%s", (int)(slash - gemm_path), gemm_path, CONV_CACHE_FILE);
}

static const char *pass_name(conv_pass p) {
    return p == CONV_PASS_FWD ? "fwd" : p == CONV_PASS_BWD_DATA ? "bwd_data" : "bwd_filter";
}

static const char *layout_field(int nhwc) {
    static const char *names[] = {"nchw", "nhwc", "form from nchw", "form from nhwc"};
    return (unsigned)nhwc < 4 ? names[nhwc] : "?";
}

static const char *math_name(conv_math m) {
    static const char *names[] = {"fp32", "tf32", "bf16", "fp16"};
    return (unsigned)m < 4 ? names[m] : "?";
}

brisk_status conv_cache_key(const conv_algo_device *dev, const conv_algo_shape *s, char *out, size_t out_size,
                            brisk_error *err) {
    char gpu[128];
    snprintf(gpu, sizeof gpu, "%s", dev->gpu_name ? dev->gpu_name : "?");
    for (char *p = gpu; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
    const brisk_window *w = &s->win;
    int len = snprintf(out, out_size,
                       "%s|sm_%d%d x%d|cudnn %zu|%s n%lld c%lld h%lld w%lld co%lld k%dx%d s%dx%d p%dx%d d%dx%d g%d "
                       "%s %s%s",
                       gpu, dev->cc_major, dev->cc_minor, dev->sms, dev->cudnn_version, pass_name(s->pass),
                       (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->co, w->kh,
                       w->kw, w->sh, w->sw, w->ph, w->pw, w->dh, w->dw, w->groups, math_name(s->math),
                       layout_field(s->nhwc), s->deterministic ? " det" : "");
    if (len < 0 || (size_t)len >= out_size || len >= CONV_CACHE_KEY_MAX)
        return brisk_errorf(err, BRISK_ERR_INVALID, "conv algorithm cache: key of %d characters (at most %d)", len,
                            CONV_CACHE_KEY_MAX - 1);
    return BRISK_OK;
}

int conv_cache_get(const conv_algo_cache *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) return c->algos[i];
    return -1;
}

brisk_status conv_cache_put(conv_algo_cache *c, const char *key, int algo, brisk_error *err) {
    size_t len = strlen(key);
    if (len == 0 || len >= CONV_CACHE_KEY_MAX || strchr(key, '\t') || strchr(key, '\n') || algo < 0 ||
        algo > CONV_CACHE_ALGO_MAX)
        return brisk_errorf(err, BRISK_ERR_INVALID,
                            "conv algorithm cache: entry \"%.40s\" -> %d (expected a key of 1..%d characters "
                            "without tabs or newlines, algorithm 0..%d)",
                            key, algo, CONV_CACHE_KEY_MAX - 1, CONV_CACHE_ALGO_MAX);
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) {
            c->dirty |= c->algos[i] != algo;
            c->algos[i] = algo;
            return BRISK_OK;
        }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        char(*k)[CONV_CACHE_KEY_MAX] = realloc(c->keys, (size_t)cap * sizeof *k);
        if (!k) return brisk_errorf(err, BRISK_ERR_NOMEM, "conv algorithm cache: out of memory");
        c->keys = k;
        int *a = realloc(c->algos, (size_t)cap * sizeof *a);
        if (!a) return brisk_errorf(err, BRISK_ERR_NOMEM, "conv algorithm cache: out of memory");
        c->algos = a;
        c->cap = cap;
    }
    memcpy(c->keys[c->n], key, len + 1);
    c->algos[c->n++] = algo;
    c->dirty = 1;
    return BRISK_OK;
}

void conv_cache_free(conv_algo_cache *c) {
    free(c->keys);
    free(c->algos);
    c->keys = NULL;
    c->algos = NULL;
    c->n = c->cap = c->dirty = 0;
}

int conv_algo_atomic(conv_pass pass, int algo) {
    if (pass == CONV_PASS_BWD_DATA) return algo == 0;
    if (pass == CONV_PASS_BWD_FILTER) return algo == 0 || algo == 3;
    return 0;
}

int conv_algo_usable(conv_pass pass, int algo, int status_ok, size_t memory, int flagged_deterministic,
                     int deterministic, size_t limit) {
    if (!status_ok || memory > limit || algo < 0 || algo > CONV_CACHE_ALGO_MAX) return 0;
    return !deterministic || (flagged_deterministic && !conv_algo_atomic(pass, algo));
}

/* One "key<TAB>algorithm" line of len bytes (no newline) into c, or why not in *why. */
static int parse_line(conv_algo_cache *c, const char *line, size_t len, const char **why, brisk_error *err) {
    const char *tab = memchr(line, '\t', len);
    if (!tab) return *why = "no tab between key and algorithm", -1;
    size_t klen = (size_t)(tab - line);
    if (klen == 0 || klen >= CONV_CACHE_KEY_MAX) return *why = "a key of 1..383 characters", -1;
    const char *num = tab + 1, *end = line + len;
    if (num == end || end - num > 2) return *why = "an algorithm number 0..63 after the tab", -1;
    int algo = 0;
    for (const char *p = num; p < end; p++) {
        if (*p < '0' || *p > '9') return *why = "an algorithm number 0..63 after the tab", -1;
        algo = algo * 10 + (*p - '0');
    }
    if (algo > CONV_CACHE_ALGO_MAX) return *why = "an algorithm number 0..63 after the tab", -1;
    char key[CONV_CACHE_KEY_MAX];
    memcpy(key, line, klen);
    key[klen] = 0;
    if (conv_cache_get(c, key) >= 0) return *why = "each key once", -1;
    if (conv_cache_put(c, key, algo, err)) return *why = NULL, -1;
    return 0;
}

brisk_status conv_cache_parse(conv_algo_cache *c, const char *text, const char *path, brisk_error *err) {
    conv_cache_free(c);
    const char *p = text;
    int line_no = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        line_no++;
        const char *why = NULL;
        int bad;
        if (line_no == 1) {
            bad = len != strlen(CONV_CACHE_HEADER) || memcmp(p, CONV_CACHE_HEADER, len) != 0;
            if (bad) why = "the header \"" CONV_CACHE_HEADER "\"";
        } else {
            bad = parse_line(c, p, len, &why, err) != 0;
        }
        if (bad) {
            conv_cache_free(c);
            if (!why) return err ? err->code : BRISK_ERR_NOMEM;
            return brisk_errorf(err, BRISK_ERR_FORMAT,
                                "conv algorithm cache %s line %d: \"%.*s\" (expected %s); delete the file to "
                                "time the convolutions again", path, line_no, (int)(len < 60 ? len : 60), p, why);
        }
        if (!nl) {
            conv_cache_free(c);
            return brisk_errorf(err, BRISK_ERR_FORMAT,
                                "conv algorithm cache %s line %d: no newline at the end (a cut-off write?); "
                                "delete the file to time the convolutions again", path, line_no);
        }
        p = nl + 1;
    }
    if (line_no == 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT,
                            "conv algorithm cache %s: empty (expected the header \"" CONV_CACHE_HEADER "\")", path);
    c->dirty = 0;
    return BRISK_OK;
}

brisk_status conv_cache_load(conv_algo_cache *c, brisk_error *err) {
    conv_cache_free(c);
    if (!c->path[0]) return BRISK_OK;
    FILE *f = fopen(c->path, "rb");
    if (!f) {
        if (errno == ENOENT) return BRISK_OK;
        return brisk_errorf(err, BRISK_ERR_IO, "conv algorithm cache %s: cannot open: %s", c->path, strerror(errno));
    }
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap + 1);
    brisk_status st = BRISK_OK;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= (size_t)64 << 20) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "conv algorithm cache %s: over 64 MiB (not a cache file?)",
                              c->path);
            break;
        }
        char *b = realloc(buf, 2 * cap + 1);
        if (!b) free(buf);
        buf = b;
        cap *= 2;
    }
    if (!buf) st = brisk_errorf(err, BRISK_ERR_NOMEM, "conv algorithm cache %s: out of memory", c->path);
    else if (!st && ferror(f)) st = brisk_errorf(err, BRISK_ERR_IO, "conv algorithm cache %s: read failed", c->path);
    fclose(f);
    if (!st) {
        buf[n] = 0;
        if (strlen(buf) != n)
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "conv algorithm cache %s: a NUL byte (not a text file)", c->path);
        else st = conv_cache_parse(c, buf, c->path, err);
    }
    free(buf);
    return st;
}

char *conv_cache_format(const conv_algo_cache *c) {
    size_t cap = strlen(CONV_CACHE_HEADER) + 2 + (size_t)c->n * (CONV_CACHE_KEY_MAX + 4);
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t at = (size_t)snprintf(out, cap, "%s\n", CONV_CACHE_HEADER);
    for (int i = 0; i < c->n; i++) at += (size_t)snprintf(out + at, cap - at, "%s\t%d\n", c->keys[i], c->algos[i]);
    return out;
}

brisk_status conv_cache_save(conv_algo_cache *c, brisk_error *err) {
    if (!c->dirty || !c->path[0]) return BRISK_OK;
    char *text = conv_cache_format(c);
    if (!text) return brisk_errorf(err, BRISK_ERR_NOMEM, "conv algorithm cache %s: out of memory", c->path);
    if (brisk_cache_prepare(c->path) != 0) { /* no folder to keep it in (no $HOME): time again next run */
        free(text);
        return BRISK_OK;
    }
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", c->path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    brisk_status st = BRISK_OK;
    if (!f) {
        st = brisk_errorf(err, BRISK_ERR_IO, "conv algorithm cache %s: cannot write: %s", tmp, strerror(errno));
    } else {
        size_t len = strlen(text);
        int bad = fwrite(text, 1, len, f) != len;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, c->path) != 0) {
            st = brisk_errorf(err, BRISK_ERR_IO, "conv algorithm cache %s: cannot write: %s", c->path,
                              strerror(errno));
            remove(tmp);
        }
    }
    free(text);
    if (!st) c->dirty = 0;
    return st;
}
