/* One option syntax for every command: "--flag value", "--flag=value", and "--" ending the
 * options, so a positional argument may start with '-'. A command line error is reported
 * the same way everywhere (exit status 2, the flag named, see `brisk CMD --help`).
 * --quiet and --log-format are every command's: parsed here, never in a command's table. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_usage(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_fail("%s: %s (see brisk %s --help)", cmd, msg, cmd); /* as text or JSON (--log-format) */
    return BRISK_EXIT_USAGE;
}

static int quiet;

void cli_help(const char *text) {
    fputs(text, stdout);
    fputs("\ncommon options (every command):\n"
          "  --quiet                no information lines: only warnings, errors and what the command\n"
          "                         outputs (train: and the final summary; a pipeline: its table)\n"
          "  --log-format text|json json: every log line and error one JSON object {\"time\", \"level\",\n"
          "                         \"msg\"}, information on stdout (on stderr when the command's\n"
          "                         output goes there), warnings and errors on stderr\n",
          stdout);
}

int cli_quiet(void) { return quiet; }

brisk_logger cli_logger(int info_on_stderr) {
    return (brisk_logger){info_on_stderr ? cli_log_stderr : cli_log, NULL, quiet ? BRISK_LOG_WARN : BRISK_LOG_INFO};
}

void cli_note(int on_stderr, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    brisk_logger lg = cli_logger(on_stderr);
    brisk_log(&lg, BRISK_LOG_INFO, "%s", msg);
}

static int set_log_format(const char *cmd, const char *v) {
    if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0)
        return cli_usage(cmd, "--log-format '%s': expected text or json", v);
    cli_set_log_json(strcmp(v, "json") == 0);
    return 0;
}

/* The common options, before the command's own; 1 when argument i is one (its value taken). */
static int common_option(cli_parser *p, const char *a, int *err) {
    static const char fmt[] = "--log-format";
    size_t n = strlen(fmt);
    if (strcmp(a, "--quiet") == 0) return quiet = 1, 1;
    if (strncmp(a, "--quiet=", 8) == 0) return *err = cli_usage(p->cmd, "--quiet takes no value, got '%s'", a), 1;
    if (strncmp(a, fmt, n) != 0 || (a[n] != '=' && a[n] != '\0')) return 0;
    if (a[n] == '=') *err = set_log_format(p->cmd, a + n + 1);
    else if (p->i + 1 < p->argc) *err = set_log_format(p->cmd, p->argv[++p->i]);
    else *err = cli_usage(p->cmd, "%s: missing value", fmt);
    return 1;
}

void cli_scan_log_format(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--log-format=json") == 0 ||
            (strcmp(argv[i], "--log-format") == 0 && i + 1 < argc && strcmp(argv[i + 1], "json") == 0))
            cli_set_log_json(1);
}

int cli_next(cli_parser *p, const char **name, const char **value) {
    *name = *value = NULL;
    if (++p->i >= p->argc) return CLI_END;
    const char *a = p->argv[p->i];
    if (p->dashdash || a[0] != '-' || strcmp(a, "-") == 0) { /* "-" names standard input or output */
        *value = a;
        return CLI_POS;
    }
    if (strcmp(a, "--") == 0) {
        p->dashdash = 1;
        return cli_next(p, name, value);
    }
    if (cli_is_help(a)) return CLI_HELP;
    int err = 0;
    if (common_option(p, a, &err)) return err ? CLI_ERR : cli_next(p, name, value);
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    for (int k = 0; p->opts[k].name; k++) {
        if (strlen(p->opts[k].name) != len || strncmp(p->opts[k].name, a, len) != 0) continue;
        *name = p->opts[k].name;
        if (!p->opts[k].has_value) {
            if (eq) return cli_usage(p->cmd, "%s takes no value, got '%s'", *name, a), CLI_ERR;
            return k;
        }
        if (eq) *value = eq + 1;
        else if (p->i + 1 < p->argc) *value = p->argv[++p->i];
        else return cli_usage(p->cmd, "%s: missing value", *name), CLI_ERR;
        return k;
    }
    return cli_usage(p->cmd, "unknown option '%.*s'", (int)len, a), CLI_ERR;
}

int cli_parse_count(const char *cmd, const char *flag, const char *v, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!v[0] || *end || errno || x < lo || x > hi)
        return cli_usage(cmd, "%s '%s': expected a whole number from %lld to %lld", flag, v, lo, hi);
    *out = x;
    return 0;
}

static const struct {
    const char *flag, *key; /* key: a flag's config key, or a switch's "key=value" */
    int takes_value, profile;
} overrides[] = {
    {"--no-prefetch", "speed.prefetch=0", 0, 1},
    {"--no-graph", "speed.cuda_graph=false", 0, 0},
    {"--no-tf32", "speed.tf32=false", 0, 1},
    {"--no-autotune", "speed.autotune=false", 0, 1},
    {"--no-fuse", "speed.fuse=false", 0, 1},
    {"--deterministic", "speed.deterministic=true", 0, 1},
    {"--shard-optimizer", "dist.shard_optimizer=true", 0, 0},
    {"--recompute", "model.recompute=true", 0, 0},
    {"--device", "speed.device", 1, 1},
    {"--precision", "speed.precision", 1, 1},
    {"--batch-size", "train.batch_size", 1, 1},
    {"--epochs", "train.epochs", 1, 0},
    {"--max-steps", "train.max_steps", 1, 0},
    {"--accumulate", "train.accumulate", 1, 1},
    {"--seed", "train.seed", 1, 0},
    {"--out", "train.out_dir", 1, 0},
    {"--checkpoint-every", "train.checkpoint_every", 1, 0},
    {"--log-every", "train.log_every", 1, 0},
    {"--lr", "optim.lr", 1, 0},
    {"--clip-norm", "optim.clip_norm", 1, 0},
    {"--prefetch", "speed.prefetch", 1, 0},
    {"--threads", "speed.threads", 1, 1},
    {"--keep-checkpoints", "train.keep_checkpoints", 1, 0},
    {"--memory-limit", "speed.memory_limit", 1, 0},
    {"--checkpoint-minutes", "train.checkpoint_minutes", 1, 0},
    {"--checkpoint-epochs", "train.checkpoint_epochs", 1, 0},
    {"--bucket-mb", "dist.bucket_mb", 1, 0},
    {"--dist-timeout", "dist.timeout_s", 1, 0},
    {"--model", "model.file", 1, 0}, /* train adds model.type=onnx and makes the path absolute */
};
_Static_assert(sizeof overrides / sizeof overrides[0] <= CLI_N_OVERRIDES, "CLI_N_OVERRIDES is too small");

void cli_override_opts(cli_opt *opts, int *no, int profile, int *which) {
    for (int i = 0; i < (int)(sizeof overrides / sizeof overrides[0]); i++) {
        if (profile && !overrides[i].profile) continue;
        which[*no] = i;
        opts[(*no)++] = (cli_opt){overrides[i].flag, overrides[i].takes_value};
    }
}

char *cli_override_arg(int which, const char *value) {
    if (!overrides[which].takes_value) return strdup(overrides[which].key);
    size_t n = strlen(overrides[which].key) + strlen(value) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s=%s", overrides[which].key, value);
    return s;
}

/* The error's key path `path` (len n) and what follows it concern override key `key` (len k):
 * the same key, a key below it (an array or object the override gave), or one above it
 * whose type the override changed, or an unknown key the override named. */
static int concerns(const char *path, size_t n, const char *what, const char *key, size_t k) {
    static const char unknown[] = "unknown key \"";
    if (strncmp(what, unknown, sizeof unknown - 1) == 0) { /* "optim: unknown key "lrr"": key is optim.lrr */
        const char *name = what + sizeof unknown - 1, *q = strchr(name, '"');
        size_t m = q ? (size_t)(q - name) : 0, at = n ? n + 1 : 0;
        return q && k >= at + m && strncmp(key, path, n) == 0 && (!n || key[n] == '.') &&
               strncmp(key + at, name, m) == 0 && (k == at + m || key[at + m] == '.' || key[at + m] == '[');
    }
    if (n == k) return strncmp(path, key, n) == 0;
    if (n > k) return strncmp(path, key, k) == 0 && (path[k] == '.' || path[k] == '[');
    return strncmp(what, "expected", 8) == 0 && strncmp(key, path, n) == 0 && (key[n] == '.' || key[n] == '[');
}

int cli_config_fail(const char *cmd, const char *config, char *const *over, const int *from, int n_over,
                    const brisk_error *err) {
    const char *msg = err->msg;
    if (strncmp(msg, "--set ", 6) == 0) return cli_usage(cmd, "%s", msg); /* not KEY=VALUE, or a bad key path */
    size_t cl = strlen(config);
    if (strncmp(msg, config, cl) != 0 || strncmp(msg + cl, ": ", 2) != 0) return cli_fail_err(err);
    /* "train.epochs: expected ..., got 0" or, at the top, "unknown key ..." */
    const char *rest = msg + cl + 2, *colon = strstr(rest, ": ");
    int top = strncmp(rest, "unknown key", 11) == 0;
    if (!top && !colon) return cli_fail_err(err);
    size_t n = top ? 0 : (size_t)(colon - rest);
    const char *what = top ? rest : colon + 2;
    for (int i = n_over - 1; i >= 0; i--) { /* the last override of a key is the one in force */
        const char *eq = strchr(over[i], '=');
        if (!eq || !concerns(rest, n, what, over[i], (size_t)(eq - over[i]))) continue;
        if (from[i] < 0) return cli_usage(cmd, "--set %s: %s", over[i], rest);
        return cli_usage(cmd, "%s: %s", overrides[from[i]].flag, rest);
    }
    return cli_fail_err(err);
}
