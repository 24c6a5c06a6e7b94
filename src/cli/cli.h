/* The brisk command: one file per verb; shared helpers here. The CLI holds no logic
 * the library lacks: it parses flags, calls the library, prints. */
#ifndef BRISK_CLI_H
#define BRISK_CLI_H

#include "brisk/brisk.h"

int cmd_check(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sample(int argc, char **argv);

/* Prints "brisk: <msg>" to stderr and returns 1 (the exit status for errors). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_fail_err(const brisk_error *err);
/* A log sink printing to stderr (warnings, errors) or stdout (info). */
void cli_log(void *user, brisk_log_level level, const char *msg);
/* True when argv[i] is --help or -h. */
int cli_is_help(const char *arg);

#endif
