/* brisk: fast neural-network training in C. Dispatches to the verbs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/progress.h"

/* How log lines reach the terminal: text (default) or one JSON object per line
 * (--log-format json); and whether a live progress bar is drawn on stdout, which every
 * other line first erases (the next status redraws it). */
static int log_json;
static int bar_drawn;
static int label_rank = -1; /* several ranks: this process's, in front of its warnings and errors */

void cli_set_rank(int rank, int world) { label_rank = world > 1 ? rank : -1; }

void cli_set_log_json(int on) { log_json = on; }
int cli_log_is_json(void) { return log_json; }

static const char usage[] =
    "usage: brisk <command> [options]\n"
    "\n"
    "commands:\n"
    "  check              what hardware and libraries brisk sees, and why no GPU\n"
    "  train CONFIG       train a model from a JSON config\n"
    "  predict CKPT       run a trained model on an input array\n"
    "  export CKPT        write the model as ONNX (--onnx FILE)\n"
    "  rollout CKPT       forecast autoregressively over a NetCDF file (meshgnn), RMSE per lead\n"
    "  sample CKPT        sample fine fields from a diffusion model, given coarse ones\n"
    "  info CKPT|CONFIG   a checkpoint's tensors and training state, or a config's layer table\n"
    "  synth KIND PATH    write the example data set KIND (diffusion, tabular, series, images, weather)\n"
    "  bench CONFIG       time CONFIG with each GPU optimization added in turn\n"
    "  profile CONFIG     where a step's time goes: per op type and node, and the launch floor\n"
    "  report RUN_DIR     write the run's report.html: loss, speed, memory plots (train writes it too)\n"
    "  config --reference every config key: type, accepted values, default, meaning\n"
    "\n"
    "'brisk <command> --help' describes each command's options; every command takes them as\n"
    "--flag value or --flag=value, and -- ends them. Exit status 2: a bad command line.\n";

/* Text that came from files (member and tensor names, metadata, CSV headers) reaches the
 * terminal only through here: control characters other than newline and tab, C1 controls and
 * bytes that are not UTF-8 are shown as \xNN, so a file cannot move the cursor, retitle the
 * window or hide text. */
void cli_put_safe(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t n = brisk_utf8_char_len(p, 4); /* stops at the NUL: it is no continuation byte */
        int ok = n > 0;
        if (ok && n == 2 && c == 0xC2 && p[1] < 0xA0) ok = 0; /* C1 controls, U+0080..U+009F */
        if (ok && n == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F)) ok = 0;
        if (!ok) {
            fprintf(f, "\\x%02x", c);
            p++;
            continue;
        }
        fwrite(p, 1, n, f);
        p += n;
    }
}

/* A JSON string: quotes, backslashes and control characters escaped, bytes that are not
 * UTF-8 shown as the text \xNN (as cli_put_safe does), so every line parses. */
static void put_json_string(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        unsigned c = *p;
        size_t n = brisk_utf8_char_len(p, 4);
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c), p++;
        else if (c == '\n') fputs("\\n", f), p++;
        else if (c == '\t') fputs("\\t", f), p++;
        else if (n == 0) fprintf(f, "\\\\x%02x", c), p++;
        else if (n == 1 && (c < 0x20 || c == 0x7F)) fprintf(f, "\\u%04x", c), p++;
        else fwrite(p, 1, n, f), p += n;
    }
    fputc('"', f);
}

static void erase_bar(void) {
    if (!bar_drawn) return;
    fputs("\r\033[K", stdout);
    fflush(stdout);
    bar_drawn = 0;
}

/* One log record: text as before ("brisk: warning: ..." on stderr, information on stdout),
 * or {"time": .., "level": .., "msg": ..} on the same stream. */
static void put_record(FILE *f, const char *level, const char *prefix, const char *msg) {
    erase_bar();
    char mine[24];
    int n = snprintf(mine, sizeof mine, "rank %d", label_rank);
    /* not twice: the process group's own errors begin "rank R of N:" */
    const int label = label_rank >= 0 && strcmp(level, "info") != 0 && strcmp(level, "debug") != 0 &&
                      !(strncmp(msg, mine, (size_t)n) == 0 && (msg[n] == ' ' || msg[n] == ':'));
    if (!log_json) {
        if (label && strncmp(prefix, "brisk: ", 7) == 0) fprintf(f, "brisk: rank %d: %s", label_rank, prefix + 7);
        else fputs(prefix, f);
        cli_put_safe(f, msg);
        fputc('\n', f);
        fflush(f);
        return;
    }
    char when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\"time\": \"%s\", \"level\": \"%s\", ", when, level);
    if (label) fprintf(f, "\"rank\": %d, ", label_rank);
    fputs("\"msg\": ", f);
    put_json_string(f, msg);
    fputs("}\n", f);
    fflush(f);
}

static void vreport(const char *fmt, va_list ap) {
    char small[1024], *buf = small;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small && (buf = malloc((size_t)n + 1))) vsnprintf(buf, (size_t)n + 1, fmt, aq);
    va_end(aq);
    put_record(stderr, "error", "brisk: ", buf ? buf : small);
    if (buf != small) free(buf);
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    return 1;
}

int cli_fail_err(const brisk_error *err) { return cli_fail("%s", err->msg); }

int cli_make_folders(const char *path) {
    brisk_error err = {0};
    return path && brisk_make_parent_folders(path, &err) ? cli_fail_err(&err) : 0;
}

static const char *level_name(brisk_log_level level) {
    return level == BRISK_LOG_ERROR ? "error" : level == BRISK_LOG_WARN ? "warning" : level == BRISK_LOG_INFO ? "info" : "debug";
}

void cli_log(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    if (level <= BRISK_LOG_WARN)
        put_record(stderr, level_name(level), level == BRISK_LOG_WARN ? "brisk: warning: " : "brisk: ", msg);
    else
        put_record(stdout, level_name(level), "", msg);
}

void cli_log_stderr(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    put_record(stderr, level_name(level), level == BRISK_LOG_WARN ? "brisk: warning: " : "brisk: ", msg);
}

void cli_quiet_log(void *user, brisk_log_level level, const char *msg) {
    int *in_summary = user;
    if (level == BRISK_LOG_INFO && !*in_summary && strncmp(msg, BRISK_SUMMARY_HEAD, strlen(BRISK_SUMMARY_HEAD)) != 0)
        return;
    if (level == BRISK_LOG_INFO) *in_summary = 1;
    cli_log(NULL, level, msg);
}

void cli_progress_bar(void *user, const brisk_progress *p) {
    (void)user;
    struct winsize ws;
    int width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
    char line[512];
    brisk_progress_line(p, width, line, sizeof line);
    fputs("\r", stdout);
    fputs(line, stdout);
    fputs("\033[K", stdout);
    fflush(stdout);
    bar_drawn = 1;
}

void cli_progress_end(void) { erase_bar(); }

int cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int main(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("brisk %s\n", BRISK_VERSION);
        return 0;
    }
    cli_scan_log_format(argc, argv);
    /* each record reaches stderr in one write (put_record ends it with a newline and a flush):
     * the ranks of an mpirun job share one stderr, and their lines no longer interleave */
    setvbuf(stderr, NULL, _IOLBF, BUFSIZ);
    static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"check", cmd_check}, {"train", cmd_train}, {"predict", cmd_predict},
        {"info", cmd_info},   {"synth", cmd_synth},   {"bench", cmd_bench},
        {"sample", cmd_sample}, {"config", cmd_config}, {"export", cmd_export},
        {"rollout", cmd_rollout},
        {"report", cmd_report}, {"profile", cmd_profile},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) return cmds[i].fn(argc - 1, argv + 1);
    cli_fail("unknown command '%s'", argv[1]);
    if (!cli_log_is_json()) fputs(usage, stderr);
    return 2;
}
