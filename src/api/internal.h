/* The session behind a handle, shared by the files of src/api: handles.c maps the handles a
 * program holds to sessions, check.c checks array arguments, session.c and infer.c do the
 * work, binding.c is the Fortran binding's way in. */
#ifndef BRISK_API_INTERNAL_H
#define BRISK_API_INTERNAL_H

#include <fenv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "api/ring.h"
#include "brisk/api.h"
#include "brisk/brisk.h"

typedef struct api_session {
    brisk_error err;           /* why creation failed (calls keep theirs per thread: handles.c) */
    int ready;                 /* 0: creation failed and only err is meaningful */
    unsigned slot;             /* where handles.c keeps it, and its generation there */
    uintptr_t gen;
    int calls;                 /* calls in progress (under handles.c's table mutex) */
    atomic_int dying;          /* destroy has begun: calls still waiting for `lock` give up */
    pthread_mutex_t lock;      /* held by the calls that train, infer, save, load or query */
    pthread_mutex_t ring_lock; /* held while the buffer is read or written */
    brisk_logger log;
    brisk_config cfg;
    brisk_model_io io;         /* the model's training fields: [0] input, [1] target */
    int64_t row_in, row_out;   /* predict's row widths (brisk_model_row_widths; 0: no predict) */
    brisk_trainer *trainer;
    brisk_dist *dist;          /* session.mpi_comm: the host's communicator (NULL: alone) */
    brisk_ring ring;
    brisk_inference *inf;      /* built on the first predict or sample */
    int inf_stale;             /* the trainer's parameters changed since inf copied them */
    int loaded;                /* parameters came from a checkpoint (brisk_session_load) */
    int stop_signals;          /* holds brisk's signal handlers (api_signals_acquire) */
    int warned_untrained;
    brisk_run_summary last;    /* of the last train call */
    int trained;
    int64_t epochs;
    double last_loss, infer_seconds;
} api_session;

/* ---- handles.c */
/* What a call needs of its session besides being alive: */
typedef enum api_mode {
    API_FREE, /* nothing (push and clear lock the buffer themselves; sizes never change) */
    API_READ, /* the session's mutex, unless this thread is inside a call of it (a callback) */
    API_WORK  /* the session's mutex, and not from inside any call's callback (BRISK_BUSY) */
} api_mode;
/* One call into the API: the session its handle names, its message, and the caller's
 * floating-point environment, given back by api_leave whatever brisk did to the flags
 * (gfortran reports flags left raised at STOP). */
typedef struct api_call {
    brisk_session *h;
    api_session *s;  /* NULL when the handle names no usable session */
    brisk_error err; /* this call's message, kept for the calling thread by api_leave */
    int locked;
    fenv_t fe;
} api_call;
/* Resolves h and counts the call in: BRISK_OK with c->s, else BRISK_ERR_INVALID (NULL,
 * destroyed, not a handle, or a session whose creation failed: it keeps that message), or
 * BRISK_BUSY (c->err says why). Every api_enter is paired with an api_leave. */
brisk_status api_enter(brisk_session *h, api_call *c, api_mode mode);
brisk_status api_leave(api_call *c, brisk_status st);
/* A new slot for s (sets s->slot, s->gen): its handle, or NULL when every slot is taken. */
brisk_session *api_handle_new(api_session *s);
/* Retires h (it and its copies are "destroyed" from now on), waits for the calls in
 * progress on its session to end, and returns the session for freeing; NULL with *why set
 * when h names none, or when called from inside a call of that session. */
api_session *api_handle_retire(brisk_session *h, const char **why);
/* Whether a stop was asked for s (brisk_session_request_stop, or a signal caught by
 * brisk's handlers); the trainer polls it after every step. */
int api_stop_requested(const api_session *s);
/* Withdraws a stop asked for s through its handle (not a caught signal). */
void api_stop_clear(const api_session *s);
/* brisk's stop handlers for a session created with "stop_signals": in from the first such
 * session, the program's own handlers back after the last is destroyed. */
brisk_status api_signals_acquire(void);
void api_signals_release(void);

/* ---- check.c: array arguments, described in the caller's terms */
typedef struct api_ctx {
    const char *fn;  /* "push" (C) or "brisk_push" (Fortran) */
    int fortran;     /* 1: indices 1-based as name(element, sample), one sample per column */
} api_ctx;
typedef struct api_arg {
    const char *name;      /* the argument's name in the caller's language */
    const float *v;
    int64_t stride;        /* floats between the starts of consecutive samples */
    int64_t width;         /* values per sample the model reads */
} api_arg;
/* Every value of n samples finite (labels > 0: each an integer in [0, labels)); the error
 * names the first bad one and ends with "(nothing_done)". */
brisk_status api_check_values(const api_ctx *c, const api_arg *a, int64_t n, int64_t labels,
                              const char *nothing_done, brisk_error *err);
/* A stride shorter than a sample (C); 0 means packed and becomes width. */
brisk_status api_check_stride(const api_ctx *c, api_arg *a, brisk_error *err);

/* ---- session.c, infer.c: the operations behind the C functions and the binding */
/* Each writes its failure into err (the call's own: api_call.err). */
brisk_status api_push(api_session *s, const api_ctx *c, int64_t n, api_arg *in, api_arg *tg, brisk_error *err);
brisk_status api_predict(api_session *s, const api_ctx *c, int64_t n, api_arg *in, float *out, api_arg *out_arg,
                         brisk_error *err);
brisk_status api_sample(api_session *s, const api_ctx *c, int64_t n, api_arg *coarse, api_arg *guess, float *fine,
                        api_arg *fine_arg, int method, int steps, double eta, uint64_t seed, brisk_error *err);

/* ---- binding.c: the Fortran binding's entry points (arrays as (rows, columns), one sample
 * per column; rows must equal the model's width; g_rows -1: no guess). */
brisk_status brisk_f_push(brisk_session *h, int64_t in_rows, int64_t in_cols, const float *input, int64_t tg_rows,
                          int64_t tg_cols, const float *target);
brisk_status brisk_f_predict(brisk_session *h, int64_t in_rows, int64_t in_cols, const float *input, int64_t out_rows,
                             int64_t out_cols, float *output);
brisk_status brisk_f_sample(brisk_session *h, int64_t c_rows, int64_t c_cols, const float *coarse, int64_t g_rows,
                            int64_t g_cols, const float *guess, int64_t f_rows, int64_t f_cols, float *fine, int method,
                            int steps, double eta, uint64_t seed);

#endif
