/* One trainer per run directory. Two trainers writing one directory would overwrite
 * each other's checkpoints and interleave their metrics, so the first to start holds a
 * lock on <out_dir>/brisk.lock and the second refuses, naming the holder (pid, host,
 * start time, which the holder writes into the file).
 *
 * The lock is an fcntl record lock, not the file's existence: the kernel (or the NFS
 * lock manager) drops it when the holder dies, even by SIGKILL or with its node, so a
 * preempted job that is requeued elsewhere is never locked out by its own corpse. Open
 * file description locks (F_OFD_SETLK) are used where the system has them, so that two
 * trainers in one process exclude each other too. The file is never deleted: deleting a
 * lock file lets a third process lock a new inode while a second holds the old one. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run/checkpoint_file.h"

/* Kernels before 3.15 lack OFD locks (EINVAL): a process-wide lock then. */
static int try_lock(int fd) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return 0;
    if (errno != EINVAL) return -1;
#endif
    return fcntl(fd, F_SETLK, &fl);
}

#define LOCK_NAME "brisk.lock"

/* The holder's own description of itself, for the refusal message. */
static void read_holder(int fd, char *out, size_t n) {
    char buf[256];
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    buf[k > 0 ? k : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    snprintf(out, n, "%s", buf[0] ? buf : "a process that has not written its name yet");
}

brisk_status brisk_run_dir_lock(const char *dir, int *fd_out, const brisk_logger *log, brisk_error *err) {
    *fd_out = -1;
    char path[BRISK_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open the run directory's lock: %s", path, strerror(errno));
    if (try_lock(fd) != 0) {
        int e = errno;
        if (e == EAGAIN || e == EACCES) {
            char holder[256];
            read_holder(fd, holder, sizeof holder);
            close(fd);
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the run directory is in use by another trainer (%s); "
                                "two trainers would overwrite each other's checkpoints: give this run its own "
                                "run directory (train.out_dir; --out), or stop the other one", dir, holder);
        }
        /* Some network filesystems have no locks at all (ENOLCK, EINVAL): train unprotected. */
        brisk_log(log, BRISK_LOG_WARN, "%s: cannot lock the run directory (%s); make sure no other trainer uses it",
                  dir, strerror(e));
        close(fd);
        return BRISK_OK;
    }
    char host[128] = "?", when[64] = "?", line[384];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);
    int len = snprintf(line, sizeof line, "pid %ld on host %s, started %s\n", (long)getpid(), host, when);
    /* Best effort: the lock protects whether or not its description could be written. */
    if (ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)len, 0) != len)
        brisk_log(log, BRISK_LOG_DEBUG, "%s: could not record the holder", path);
    *fd_out = fd;
    return BRISK_OK;
}

void brisk_run_dir_unlock(int fd) {
    if (fd >= 0) close(fd);
}
