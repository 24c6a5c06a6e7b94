/* metrics.jsonl a record at a time (metrics_file.h). */
#include "report/metrics_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/train.h"

struct brisk_metrics_file {
    int fd;
    char path[BRISK_PATH_MAX + 32];
    const brisk_logger *log;
    int cut;    /* the file may end in a partial line: the next record begins with a newline */
    int warned; /* a failed write was reported (once) */
};

/* Whether the file's last byte is other than a newline (an empty file is not cut). */
static int ends_cut(int fd) {
    char last = '\n';
    off_t size = lseek(fd, 0, SEEK_END);
    return size > 0 && pread(fd, &last, 1, size - 1) == 1 && last != '\n';
}

brisk_status brisk_metrics_file_open(brisk_metrics_file **out, const char *path, const brisk_logger *log,
                                    brisk_error *err) {
    *out = NULL;
    brisk_metrics_file *m = calloc(1, sizeof *m);
    if (!m) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->log = log;
    /* read and write: the last byte is read back to see whether the previous writer was cut off */
    if ((m->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
        int e = errno;
        free(m);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open for writing: %s", path, strerror(e));
    }
    if ((m->cut = ends_cut(m->fd)))
        brisk_log(log, BRISK_LOG_WARN, "%s: its last line was cut short (a write failed or the run was killed while "
                  "writing it); this run's records start on a fresh line and brisk report skips the cut one", path);
    *out = m;
    return BRISK_OK;
}

/* All of buf, across short writes; the errno of the failure, else 0. */
static int write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        buf += w, n -= (size_t)w;
    }
    return 0;
}

void brisk_metrics_file_put(brisk_metrics_file *m, const char *line) {
    if (!m) return;
    size_t len = strlen(line);
    char *rec = malloc(len + 3);
    if (!rec) return;
    size_t k = 0;
    if (m->cut) rec[k++] = '\n';
    memcpy(rec + k, line, len);
    k += len;
    rec[k++] = '\n';
    int e = write_all(m->fd, rec, k);
    free(rec);
    if (!e) {
        m->cut = 0;
        return;
    }
    m->cut = 1; /* part of the record may have reached the file */
    if (m->warned++) return;
    brisk_log(m->log, BRISK_LOG_WARN, "%s: cannot write a record: %s; the records from here on are missing from it "
              "until writes succeed again (training and checkpoints go on)", m->path, strerror(e));
}

void brisk_metrics_file_close(brisk_metrics_file *m) {
    if (!m) return;
    close(m->fd);
    free(m);
}
