/* The brisk command: one file per verb; shared helpers here. The CLI holds no logic
 * the library lacks: it parses flags, calls the library, prints. */
#ifndef BRISK_CLI_H
#define BRISK_CLI_H

#include <stdio.h>

#include "brisk/brisk.h"

int cmd_check(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_rollout(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_profile(int argc, char **argv);

/* Prints "brisk: <msg>" to stderr and returns 1 (the exit status for errors). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_fail_err(const brisk_error *err);
/* Makes the folders of an output path that do not exist yet, as mkdir -p of its folder does
 * ("-": nothing): 0, or prints the error (naming the path and the folder) and returns 1. Every
 * command calls it for each file it writes; the library's writers never make folders. */
int cli_make_folders(const char *path);
/* A log sink printing to stderr (warnings, errors) or stdout (info). */
void cli_log(void *user, brisk_log_level level, const char *msg);
/* The same with every level on stderr (for commands writing their output to stdout). */
void cli_log_stderr(void *user, brisk_log_level level, const char *msg);
/* --log-format json: every log line and error message from here on is one JSON object
 * {"time", "level", "msg"} on the stream its text would use (information on stdout,
 * warnings and errors on stderr). */
void cli_set_log_json(int on);
int cli_log_is_json(void);
/* A log sink for --quiet: warnings and errors, and information only from the run's summary
 * (BRISK_SUMMARY_HEAD) on; user points to an int, 0 at the start. */
void cli_quiet_log(void *user, brisk_log_level level, const char *msg);
/* brisk_trainer_control.status for a terminal: one line, rewritten with \r; the next log
 * line erases it first. cli_progress_end erases it when the run is over. */
void cli_progress_bar(void *user, const brisk_progress *p);
void cli_progress_end(void);
/* Several ranks (brisk train under mpirun or srun): this process's rank goes in front of its
 * warnings and errors ("brisk: rank 1: ..."; a "rank" member in JSON records), since the ranks
 * share one stderr. world 1 (or rank < 0): no label. */
void cli_set_rank(int rank, int world);
/* deadline.c: after `seconds`, unless stopped first, prints message as an error and ends the
 * process with status 1 (for a call that cannot time out by itself). NULL: no deadline could
 * be set (the call then waits as before); stop takes NULL. */
typedef struct cli_deadline cli_deadline;
cli_deadline *cli_deadline_start(double seconds, const char *message);
void cli_deadline_stop(cli_deadline *d);
/* Prints text that may come from a file, with control characters and bytes that are not
 * UTF-8 escaped as \xNN (main.c). Every message and log line goes through it. */
void cli_put_safe(FILE *f, const char *s);
/* True when argv[i] is --help or -h. */
int cli_is_help(const char *arg);

/* ---- option parsing (args.c), the same for every command. --quiet and --log-format text|json
 * are every command's options, taken by cli_next (never in a command's table). */
/* --log-format json anywhere on the command line (before --) applies to the errors found before
 * the parser reaches it (main calls it before dispatching). */
void cli_scan_log_format(int argc, char **argv);
/* Prints a command's --help text and the common options' description. */
void cli_help(const char *text);
/* --quiet was given: information is not logged (warnings, errors and a command's output are). */
int cli_quiet(void);
/* The logger of a command: cli_log (cli_log_stderr when info_on_stderr, for commands writing
 * their output to stdout), at BRISK_LOG_WARN under --quiet, else BRISK_LOG_INFO. */
brisk_logger cli_logger(int info_on_stderr);
/* A line of information ("wrote PATH: ..."): through cli_logger, so --quiet drops it and
 * --log-format json makes it a record. */
void cli_note(int on_stderr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct cli_opt {
    const char *name; /* "--input" */
    int has_value;
} cli_opt;
typedef struct cli_parser {
    const char *cmd;      /* for messages: "predict" */
    const cli_opt *opts;  /* ends with {NULL, 0} */
    int argc;
    char **argv;
    int i;                /* start at 0: argv[0] is the command */
    int dashdash;         /* after "--": only positionals */
} cli_parser;
enum { CLI_END = -1, CLI_POS = -2, CLI_HELP = -3, CLI_ERR = -4 };
/* The config overrides `train` and `profile` take: switches (--no-tf32: speed.tf32=false)
 * and flags that set a key (--device cuda: speed.device=cuda). cli_override_opts appends
 * them to opts at *no (with profile, only those a run that keeps nothing takes: no
 * checkpoints, output folder or epochs) and records each added option's override in
 * which[]; cli_override_arg is the override's "key=value" for brisk_config_load
 * (malloc'd; NULL: out of memory). */
enum { CLI_N_OVERRIDES = 29 }; /* at least the table's size, for option arrays */
void cli_override_opts(cli_opt *opts, int *no, int profile, int *which);
char *cli_override_arg(int which, const char *value);

/* brisk_config_load failed with err: when the key it names was set last on the command line (a
 * flag such as --lr, or --set KEY=VALUE), that is a bad command line: prints the flag, its value
 * and what the key expects, and returns BRISK_EXIT_USAGE; otherwise prints err and returns 1.
 * over[i] is the i-th override ("key=value") and from[i] the flag that gave it (an index
 * cli_override_opts put in which[]), -1 for --set. */
int cli_config_fail(const char *cmd, const char *config, char *const *over, const int *from, int n_over,
                    const brisk_error *err);

/* The next argument: an option's index in opts (its value in *value when it takes one,
 * from "--flag value" or "--flag=value"), CLI_POS (*value the argument), CLI_HELP,
 * CLI_END, or CLI_ERR after printing the error (exit with BRISK_EXIT_USAGE). --quiet and
 * --log-format are taken here and skipped. */
int cli_next(cli_parser *p, const char **name, const char **value);
/* Prints "brisk: CMD: <msg> (see brisk CMD --help)" and returns BRISK_EXIT_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A strict whole number in [lo, hi] ("5abc", "1e3", "" refused); 0, or prints the error
 * and returns BRISK_EXIT_USAGE. */
int cli_parse_count(const char *cmd, const char *flag, const char *v, long long lo, long long hi, long long *out);

#endif
