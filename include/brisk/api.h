/* brisk's stable API: a training session for programs that train and infer while they run
 * (a simulation calling brisk every model step), callable from C and, through
 * bindings/fortran/brisk.f90, from Fortran. Everything a program needs is here; the other
 * headers are the library's module interfaces and may change between releases.
 *
 * A session is a trainer with its own bounded sample buffer:
 *
 *     brisk_session *s = NULL;
 *     if (brisk_session_create(config_json, NULL, NULL, &s) != BRISK_OK) {
 *         fprintf(stderr, "%s\n", brisk_session_error(s));   // s holds the reason
 *         brisk_session_destroy(s);
 *         return 1;
 *     }
 *     every model step:   brisk_session_push(s, n, coarse, 7, fine, 256);
 *     every 48 steps:     brisk_session_train_epochs(s, 1);
 *     when needed:        brisk_session_sample(s, n, coarse, 7, fine_out, 256, BRISK_SAMPLER_DDIM, 10, 0.0, seed);
 *     at the end:         brisk_session_save(s, "model.safetensors"); brisk_session_destroy(s);
 *
 * Conventions, for every function:
 *   - It returns a brisk_status (BRISK_OK = 0; errors: BRISK_ERR_INVALID 1, _IO 2, _FORMAT 3,
 *     _SHAPE 4, _NOMEM 5, _UNSUPPORTED 6, _NUMERIC 7, _INTERNAL 8, _FULL 9, BRISK_BUSY 11 (see
 *     "Threads"); and BRISK_STOPPED 10, not an error: a train call that stopped early on
 *     request, see brisk_session_request_stop)
 *     and never aborts. After an error, brisk_session_error(s) is one line saying what was
 *     wrong and what was expected; the session stays usable (a failed call changes nothing it
 *     did not finish).
 *   - A brisk_session * is a handle, not an address: after brisk_session_destroy(s), every
 *     call through s or through any copy of it returns BRISK_ERR_INVALID and
 *     brisk_session_error says the session was destroyed; nothing touches freed memory.
 *   - Arrays are float32, one sample per row. A "stride" is the distance in floats between the
 *     starts of consecutive rows (0: rows are packed, stride = the row width; a larger stride
 *     skips padding at the end of each row). Data are copied in and checked (finite values;
 *     an error names the argument, row and column, 0-based); outputs are written only into
 *     the rows asked for.
 *   - Nothing is written to stdout or stderr. Messages (device chosen and why, progress lines,
 *     the summary of each train call, warnings) go to the log callback given at creation.
 *   - Files are written only where asked: brisk_session_save, and train.out_dir when the
 *     config sets it (see "Checkpoints" at brisk_session_create); and the cache of choices
 *     brisk measured once per shape (the CPU's GEMM kernel; on a GPU the cuBLASLt and cuDNN
 *     algorithms), which makes the next run start fast: in BRISK_CACHE_DIR, else
 *     $XDG_CACHE_HOME/brisk, else $HOME/.cache/brisk, created below that folder only when
 *     the folder exists (a missing $HOME is never created). BRISK_CACHE_DIR=- (or the config's
 *     speed.autotune_cache "-") turns it off on both devices: nothing is written, and each
 *     run measures again.
 *   - The caller's floating-point environment (exception flags, rounding mode) is as it was
 *     when the call began: flags such as underflow raised inside brisk are not left set.
 *
 * Threads: every function may be called from any thread, on any session, at any time.
 *   - Sessions are independent: calls on different sessions run concurrently.
 *   - On one session, the calls that train, predict, sample, save, load or query run one
 *     after the other: a second thread's call waits until the first returns (so a query or
 *     predict from another thread waits for a running train call; brisk_session_request_stop
 *     ends that call sooner).
 *   - brisk_session_push and brisk_session_clear never wait for a train call: a solver thread
 *     pushes while a worker thread trains. A train call trains on the buffer as it was when
 *     the call began; rows pushed meanwhile are in the buffer for the next train call.
 *   - brisk_session_destroy from another thread while calls run on the session: the handle is
 *     "destroyed" for every call from that moment, destroy waits until the running calls (and
 *     those already waiting their turn, which then fail as destroyed) have returned, and only
 *     then frees the session. Nothing ever runs on freed memory.
 *   - brisk_session_error(s) is the message of the calling thread's last call on s: another
 *     thread's calls neither clear nor replace it.
 * The log callback is called on the thread of the call that logs (brisk's own worker threads
 * never call it), so from two threads at once when two threads use sessions sharing it (a
 * push warning while a train call logs). It may call brisk_session_error, _query,
 * _sizes, _push, _clear and _request_stop (of any session); a train, predict, sample, save,
 * load or destroy call made from inside it returns BRISK_BUSY (11) with a message and does
 * nothing, since it would wait for the call it is inside. The callback must return: it must
 * not throw a C++ exception or longjmp through brisk (a binding catches its exceptions and,
 * to stop training, calls brisk_session_request_stop; the Python package does so for Ctrl-C).
 * Stack: brisk's own frames take about 30 KiB of the calling thread's stack (its buffers are
 * on the heap; its thread-local storage is a few pointers), but every library in the process
 * puts its static thread-local storage at the top of every thread's stack too: glibc refuses
 * stacks below 68 KiB in a CPU build (OpenBLAS's 60 KiB) and below 176 KiB in a CUDA build
 * (Debian 12, CUDA 13). Give threads that call brisk 96 KiB above that: 256 KiB or more, 320 KiB
 * in a CUDA build (the default of 8 MiB is plenty; tests/api/test_threads.c runs such a thread).
 * Each session's CPU work runs on its own pool of speed.threads threads (brisk's, not OpenMP's,
 * so the host's OMP_WAIT_POLICY and OpenMP regions neither slow it nor are slowed by it; idle
 * pool threads sleep after ~40 us). 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the CPUs
 * this process may use (affinity mask, cgroup quota), divided among the MPI ranks on the node
 * when they are not bound to CPUs of their own; the log's device line says which. The only
 * process-wide state is the table of session handles and the flag of brisk's signal handlers.
 *
 * MPI: brisk neither initialises nor finalises MPI, so it runs inside any MPI program. Three
 * patterns (examples/README.md, examples/c/online.c):
 *   - data parallel: every rank creates its session with the config's
 *         "session": {"mpi_comm": H}
 *     where H is the communicator's Fortran handle: MPI_Comm_c2f(comm) in C, the integer
 *     communicator itself in Fortran (`use mpi`; comm%MPI_VAL with mpi_f08). brisk duplicates
 *     it (its messages never mix with the program's). MPI must be initialised by then; a
 *     handle given before MPI_Init, after MPI_Finalize, or that names no communicator is an
 *     error of brisk_session_create (the host's MPI error handlers are set to return while
 *     brisk checks it, then given back), never an abort. Each rank pushes its own samples and
 *     trains on them; gradients are averaged over the ranks, so every rank holds the same
 *     model, trained on all ranks' data. Every rank must make the same train calls with the
 *     same step counts (train_epochs runs the fewest steps any rank's buffer gives); rank 0
 *     alone writes train.out_dir. A rank that stops responding makes the others' train call
 *     fail after dist.timeout_s, naming it. Needs a brisk built with MPI (else an error).
 *   - rank 0 gathers: every rank computes its columns; MPI_Gather(v) collects coarse and fine
 *     rows on rank 0, which alone holds a session, pushes, trains and samples, and scatters the
 *     sampled fields back. One model, trained on all ranks' data.
 *   - a session per rank: each rank pushes its own columns and trains its own model (an
 *     ensemble, or regional models); give each a different train.seed (e.g. seed + rank) and,
 *     when they share a node, the default thread count already divides the node's CPUs among
 *     unbound ranks (Open MPI, MPICH/Hydra and SLURM local sizes); bound ranks use their own.
 * Stopping an MPI simulation at one step on every rank: examples/README.md ("Preemption").
 *
 * Devices: speed.device "auto" trains on the GPU when this build has the CUDA backend and a GPU
 * is usable, else on the CPU, and logs which and why. Checkpoints are device-agnostic: a file
 * written on one device loads on the other. */
#ifndef BRISK_API_H
#define BRISK_API_H

#include <stdint.h>

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers; brisk_version() is the library's that is linked (they differ
 * when a program built against one release loads another's libbrisk.so: the same major
 * version keeps this API). */
#define BRISK_VERSION_MAJOR 0
#define BRISK_VERSION_MINOR 1
#define BRISK_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" of the linked library; each pointer may be NULL. */
const char *brisk_version(int *major, int *minor, int *patch);

typedef struct brisk_session brisk_session;

/* Sampling methods of brisk_session_sample (nn.h documents the update rules). */
#ifndef BRISK_SAMPLER_KIND_DEFINED
#define BRISK_SAMPLER_KIND_DEFINED
typedef enum { BRISK_SAMPLER_DDPM = 0, BRISK_SAMPLER_DDIM = 1 } brisk_sampler_kind;
#endif

/* Creates a session from a JSON config (the format of `brisk train`, comments allowed; see
 * examples/diffusion.json) of model.type "mlp", "diffusion", or "graph" (or "onnx", an imported
 * network) with one f32 input, one target and one output, whose rows are a sample's values in C order (an input of shape
 * [3, 64, 64] is a row of 12288; others are BRISK_ERR_UNSUPPORTED: they train from files, with
 * brisk_train_run). The "data" section is optional: its "train" file is not read,
 * since the data come from brisk_session_push; "data.buffer" sets the sample buffer:
 *     "data": {"buffer": {"capacity": 3840, "when_full": "drop_oldest" | "reject"},
 *              "validation_fraction": 0.0}
 * (defaults: capacity 4096, drop_oldest, validation_fraction 0.1). A "session" section holds
 * what only a session has (`brisk train` refuses it; docs/config.md, "session"):
 *     "session": {"stop_signals": false, "resume": "refuse", "mpi_comm": -1}
 * stop_signals true installs brisk's handlers for SIGTERM, SIGINT and SIGUSR1 at creation, as
 * brisk_stop_signals_install does (off by default: the host program owns its signals).
 * resume says what creation does when train.out_dir holds a previous run (checkpoints or
 * metrics): "refuse" (the default: an error naming the choices), "auto" (continue it from its
 * newest intact checkpoint: parameters, optimizer moments, step count; a fresh start when
 * there is none) or "overwrite" (remove its checkpoints and metrics). mpi_comm: see "MPI".
 * An unknown key, a bad value or a model that cannot be built is an error naming the key.
 * log (may be NULL: silent) receives every message with log_user.
 *
 * Checkpoints: train.out_dir defaults to "" (no files). When set, the session creates the
 * directory and locks it at creation (a second session or `brisk train` on it is refused,
 * naming the holder), and train calls write metrics.jsonl and checkpoints into it
 * (step-NNNNNNNN.safetensors, the newest train.keep_checkpoints kept, and last.safetensors
 * naming the newest; each written to a temporary file, fsynced and renamed):
 *   - after the step that makes the step count a multiple of train.checkpoint_every (0: off);
 *   - after the first step at least train.checkpoint_minutes (default 30; 0: off) of wall
 *     time after the last checkpoint or the creation (time between train calls counts);
 *   - at every train.checkpoint_epochs-th epoch end (in a session default 0: off, as an epoch
 *     is one pass over the buffer; `brisk train`'s default is 1);
 *   - when a train call is stopped (brisk_session_request_stop, or a caught signal).
 * Not at the end of every train call: a call of a few steps costs no checkpoint. Call
 * brisk_session_save for a checkpoint of your own at any point (e.g. at the end of the
 * simulation). No best.safetensors: each call validates on another split of other data.
 *
 * On success *out is a new session. On failure *out is a session that only reports the error
 * (brisk_session_error) and must be destroyed; it stays NULL only when out is NULL or memory
 * ran out (or 4096 sessions are alive at once). */
brisk_status brisk_session_create(const char *config_json, brisk_log_fn log, void *log_user, brisk_session **out);
/* The same with the config read from a file (a relative data.train is then resolved as
 * `brisk train` does, though the session does not read it). */
brisk_status brisk_session_create_file(const char *config_path, brisk_log_fn log, void *log_user,
                                       brisk_session **out);
/* Frees the session and everything it holds (and unlocks its run directory). NULL is allowed.
 * Calls running on s in other threads end first (see "Threads"). Returns BRISK_OK,
 * BRISK_ERR_INVALID for a session destroyed before (a copied handle), or BRISK_BUSY from
 * inside a callback of a call on s (nothing is freed). */
brisk_status brisk_session_destroy(brisk_session *s);
/* The message of this thread's last call on s ("" when it succeeded, or none failed), or of
 * why s is no session: NULL, destroyed ("...was destroyed..."), not a handle at all, or the
 * reason its creation failed. The pointer stays valid until this thread's next call on s. */
const char *brisk_session_error(const brisk_session *s);

/* Widths of one sample: input (the coarse field of a diffusion model, x of an mlp) and target
 * (the fine field; an mlp's outputs, or 1 for a classifier's label). Either may be NULL. */
brisk_status brisk_session_sizes(brisk_session *s, int64_t *input_width, int64_t *target_width);

/* Copies n samples into the buffer: row i of input at input + i * input_stride, of target at
 * target + i * target_stride (each stride 0 or at least the width: brisk_session_sizes).
 * Every value must be finite (a classifier's label an integer in [0, classes)); a bad value
 * fails the whole push with BRISK_ERR_NUMERIC, naming the row and column, and leaves the
 * buffer unchanged. When the buffer would overflow: "drop_oldest" drops the oldest samples
 * (counted in the "dropped" query; the first drop logs a warning); "reject" stores nothing
 * and returns BRISK_ERR_FULL. */
brisk_status brisk_session_push(brisk_session *s, int64_t n, const float *input, int64_t input_stride,
                                const float *target, int64_t target_stride);
/* Empties the buffer (the model and the optimizer state stay). */
brisk_status brisk_session_clear(brisk_session *s);

/* Trains `epochs` epochs over the samples buffered now: the buffer is split into training and
 * validation samples by data.validation_fraction and train.seed (redrawn at every call, over
 * what the buffer holds then), shuffled per epoch from the seed, and cut into train.batch_size
 * batches (the last incomplete one dropped); validation runs after each epoch. With the same data, config and seed this trains exactly as
 * `brisk train` does (the same losses, bit for bit). The learning-rate schedule spans the run
 * the config describes (train.epochs or train.max_steps over the first data trained on) and
 * holds its final value after it, so online training wants the default "constant" schedule.
 * An empty buffer, or fewer samples than one batch, is an error.
 * After a stop request the call abandons the optimizer step in progress at its next micro-batch
 * or before its update (nothing of it is applied; on a GPU the step runs to its end), writes
 * the checkpoint of the last completed step (when train.out_dir is set) and returns
 * BRISK_STOPPED; the message says after which step, how many of the steps asked for were done
 * and where the checkpoint is. */
brisk_status brisk_session_train_epochs(brisk_session *s, int64_t epochs);
/* The same for a number of optimizer steps, continuing the current epoch where the last call
 * stopped (a new epoch, reshuffled, begins whenever one ends). */
brisk_status brisk_session_train_steps(brisk_session *s, int64_t steps);

/* Writes a checkpoint (safetensors: parameters under PyTorch names, optimizer moments, step,
 * epoch and the config), atomically: a temporary file, fsync, rename. */
brisk_status brisk_session_save(brisk_session *s, const char *path);
/* Loads a checkpoint of the same model (parameters, optimizer moments, step, epoch), written
 * by a session or by `brisk train` on any device; one of another model is refused, naming the
 * first tensor that differs. The buffer is unchanged. */
brisk_status brisk_session_load(brisk_session *s, const char *path);

/* MLP and graph models: output row i = model(input row i) for n rows (class probabilities for a
 * classifier). A diffusion model returns BRISK_ERR_UNSUPPORTED: it makes fields by sampling.
 * Inputs are checked like pushed ones: a NaN or inf is BRISK_ERR_NUMERIC naming its row and
 * column, and nothing is written. A model never trained nor loaded warns (log) once. */
brisk_status brisk_session_predict(brisk_session *s, int64_t n, const float *input, int64_t input_stride,
                                   float *output, int64_t output_stride);
/* Diffusion models: samples one fine field per coarse row from the current parameters.
 * method BRISK_SAMPLER_DDPM: ancestral, all of the model's noise steps (steps must be 0 or
 * model.noise.steps; eta is ignored). BRISK_SAMPLER_DDIM: `steps` (1 to noise steps, 0: all)
 * evenly spaced steps, eta in [0, 1] (0: deterministic given the seed and starting noise).
 * The noise comes from Philox keyed by seed: the same seed, rows and parameters give the same
 * samples on any thread count; an ensemble is the same call with seeds seed, seed + 1, ...
 * coarse (and guess) are checked as predict's input is. */
brisk_status brisk_session_sample(brisk_session *s, int64_t n, const float *coarse, int64_t coarse_stride,
                                  float *fine, int64_t fine_stride, int method, int steps, double eta,
                                  uint64_t seed);

/* The same, each row's chain starting from the forward process around a first guess of its
 * fine field (guess rows `guess_stride` floats apart: e.g. the simulation's own interpolation
 * of the coarse field): x = sqrt(abar) guess + sqrt(1 - abar) z at the first sampling step,
 * instead of pure noise z. Pure noise is the right start only when the model's last noise
 * level leaves no signal; the example schedule (50 steps, betas 1e-4 to 0.02) leaves
 * abar = 0.60, and a model that learnt to read the field from x_t samples far better from a
 * guided start (SDEdit, Meng et al. 2022). guess may be the fine array itself (each row is read
 * before it is written); guess NULL: brisk_session_sample. */
brisk_status brisk_session_sample_guided(brisk_session *s, int64_t n, const float *coarse, int64_t coarse_stride,
                                         const float *guess, int64_t guess_stride, float *fine, int64_t fine_stride,
                                         int method, int steps, double eta, uint64_t seed);

/* One number about the session, by name:
 *   "steps"          optimizer steps done (including those of a loaded checkpoint)
 *   "epochs"         epochs completed by this session's train calls
 *   "train_loss"     mean training loss of the last train call's last epoch (or of its steps)
 *   "last_loss"      the loss of the last training step
 *   "val_loss"       validation loss after the last train call's epochs (NaN: none ran)
 *   "val_accuracy"   classifiers: validation accuracy (else NaN)
 *   "train_seconds"  wall time of the last train call; "ms_per_step" its median step time;
 *   "samples_per_s"  its training throughput
 *   "sample_seconds" wall time of the last sample or predict call
 *   "buffered", "capacity", "pushed", "dropped"   buffer fill, size, samples accepted, dropped
 *   "input_width", "target_width"                 as brisk_session_sizes
 *   "output_width"   values per row of predict's output (an mlp's outputs: a classifier's
 *                    class count) or sample's (the fine field)
 *   "stop_requested" 1 when train calls will stop (brisk_session_request_stop, or a signal
 *                    caught by brisk's handlers), else 0; "stop_signal" that signal or 0
 * NaN where nothing was measured yet. An unknown name is an error listing the known ones. */
brisk_status brisk_session_query(brisk_session *s, const char *name, double *value);

/* ---- stopping: preemption inside a simulation
 * A batch system warns before it kills (SLURM: SIGTERM, or SIGUSR1 at --signal=USR1@120). The
 * program then wants brisk's training to end at a step boundary with a checkpoint, and its own
 * loop to save its state and exit (with 75, as `brisk train` does, a requeue script can tell
 * a stop from a failure). */

/* Asks s to stop training: the running train call (or, when none runs, the next) finishes its
 * step, writes its checkpoint and returns BRISK_STOPPED, and so does every train call after
 * it. Async-signal-safe: call it from the program's own signal handler. Push, sample, save and
 * the rest keep working. BRISK_ERR_INVALID (and nothing else happens) for a handle that names
 * no live session; no message is recorded, since a signal handler may not write one. */
brisk_status brisk_session_request_stop(brisk_session *s);
/* Withdraws the stop: train calls on s train again. It clears s's own request and, when
 * brisk's handlers caught a signal, that signal too (it is process-wide: every session's
 * stop ends) and re-arms the handlers the signal reset. For a program that saved its state
 * after a stop and goes on (a notebook after Ctrl-C). */
brisk_status brisk_session_clear_stop(brisk_session *s);
/* For programs without handlers of their own: installs brisk's for SIGTERM, SIGINT and SIGUSR1
 * (replacing the program's) for the rest of the process. A caught signal is a stop request for
 * every session of the process, from then on (until brisk_session_clear_stop); the handlers
 * reset themselves, so a second such signal acts as if brisk had none (default: the process
 * ends). Installing again while no signal has been caught re-arms them; after one was caught
 * it does nothing. The config's "session": {"stop_signals": true} installs them only while
 * such a session lives: destroying the last one gives the program its own handlers back. */
brisk_status brisk_stop_signals_install(void);
/* The signal brisk's handlers caught (SIGTERM, SIGINT, SIGUSR1), 0 if none: for ranks of an
 * MPI program that hold no session but must stop at the same step as those that do. */
int brisk_stop_signal(void);

/* ---- whole runs: `brisk train CONFIG --set KEY=VALUE ...` as one call (the Python package's
 * brisk.train). config is a JSON text, or with config_is_path a file (relative data paths are
 * then resolved from its folder, as `brisk train` does). Overrides are "key=value" strings.
 * resume (NULL: none) and overwrite are `brisk train`'s --resume CKPT|auto and --overwrite.
 * progress (may be NULL) is called at every progress line (train.log_every) with the steps
 * done, the run's total and the mean loss since the last call; a nonzero return asks the run
 * to stop after the current step, with a checkpoint (the call then returns BRISK_STOPPED).
 * On BRISK_OK or BRISK_STOPPED result_json holds the summary as one JSON object, with the keys
 * of metrics.jsonl's run_end line (brisk_run_summary_json in brisk/train.h: steps, epochs,
 * final_loss, best_val_loss, best_val_accuracy, ms_per_step_median, samples_per_s,
 * stopped_by_signal, checkpoint (the newest written, "" if none), ...) and out_dir; null: not
 * measured. A config with "models" gives {"models": {name: summary, ...}}. On an error, error
 * holds its message.
 * Writes nothing to stdout or stderr (messages go to log, at INFO and above). */
typedef int (*brisk_train_progress_fn)(void *user, int64_t step, int64_t total_steps, double loss);
brisk_status brisk_train_run(const char *config, int config_is_path, const char *const *overrides, int n_overrides,
                             const char *resume, int overwrite, brisk_log_fn log, void *log_user, brisk_train_progress_fn progress, void *progress_user,
                             char *result_json, size_t result_size, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif
#endif
