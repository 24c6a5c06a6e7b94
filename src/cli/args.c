/* One option syntax for every command: "--flag value", "--flag=value", and "--" ending the
 * options, so a positional argument may start with '-'. A command line error is reported
 * the same way everywhere (exit status 2, the flag named, see `brisk CMD --help`). */
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
