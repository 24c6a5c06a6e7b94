/* Session handles, and who may use a session when. The brisk_session * a program holds is
 * not the session's address but a handle: a slot of a process-wide table and the generation
 * of the session in that slot. A handle used after brisk_session_destroy (easy to do:
 * Fortran assignment copies handles) finds a slot whose generation moved on, or that is
 * empty, and the call is refused with "destroyed" instead of touching freed memory. Handles
 * are odd numbers, so an address passed by mistake is told apart too.
 *
 * Threads: every call counts itself into its session while it runs (under the table's
 * mutex), and destroy retires the handle at once but frees only when the count is back to
 * zero, so no call ever runs on freed memory. Calls that train, infer, save or load hold
 * the session's own mutex: from two threads they run one after the other. Push and clear
 * take only the buffer's mutex, so a solver thread pushes while another thread trains.
 * A thread that is inside a call (in its log callback) and calls again is told BRISK_BUSY
 * for the calls that would wait on itself.
 *
 * Errors are per thread: each call's message is kept for the thread that made it, so a
 * push failing in one thread is not wiped by a train call succeeding in another.
 *
 * Stop requests live in the table beside the generation they are for, written with
 * lock-free atomic stores and no lock: brisk_session_request_stop may be called from a
 * signal handler, and a request made through a stale handle can never stop the session
 * that reuses its slot. Besides signals.c's flag, this table is the library's only global
 * state. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/internal.h"

#define SLOT_BITS 12
#define MAX_SESSIONS (1u << SLOT_BITS)
#define HELD_MAX 8       /* sessions one thread can be inside at once (calls from callbacks) */
#define THREAD_ERRORS 16 /* sessions whose last message one thread keeps */

#if ATOMIC_POINTER_LOCK_FREE != 2
#error "brisk_session_request_stop needs lock-free pointer-sized atomics to be async-signal-safe"
#endif

typedef struct slot {
    atomic_uintptr_t state; /* generation << 1 | live */
    atomic_uintptr_t stop;  /* the generation a stop was requested for; 0: none */
    api_session *s;
} slot;

static slot table[MAX_SESSIONS];
static unsigned next_slot;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_ended = PTHREAD_COND_INITIALIZER;
/* Sessions created with "stop_signals": brisk's handlers are in while any lives (the
 * program's own come back after the last), unless the program installed them itself. */
static int signal_sessions, program_signals;

/* The sessions whose mutex this thread holds, innermost last. */
static _Thread_local api_session *held[HELD_MAX];
static _Thread_local int n_held;

/* The last message of this thread's calls, per handle (oldest reused first). On the heap,
 * made at the thread's first failed call: thread-local storage comes out of every thread's
 * stack, and a host's threads may have small ones. */
typedef struct thread_error {
    brisk_session *h;
    brisk_error e;
} thread_error;
typedef struct thread_errors {
    thread_error e[THREAD_ERRORS];
    unsigned next;
} thread_errors;
static pthread_key_t errors_key;
static pthread_once_t errors_once = PTHREAD_ONCE_INIT;
static void errors_key_make(void) { pthread_key_create(&errors_key, free); }

/* this thread's messages; NULL when it has none and make is 0 (or memory ran out) */
static thread_errors *thread_messages(int make) {
    pthread_once(&errors_once, errors_key_make);
    thread_errors *t = pthread_getspecific(errors_key);
    if (!t && make && (t = calloc(1, sizeof *t)) && pthread_setspecific(errors_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

static const char destroyed_msg[] =
    "this session was destroyed (brisk_session_destroy): its handle, and every copy of it, can no longer be used";
static const char not_handle_msg[] =
    "not a brisk session handle (neither NULL nor a handle from brisk_session_create); the memory holding it may be "
    "uninitialised or overwritten";
static const char null_msg[] =
    "no session (NULL): none was created into this handle, or creation ran out of memory, or 4096 sessions were "
    "alive at once (the most one process holds: destroy one first)";

static uintptr_t handle_bits(brisk_session *h) { return (uintptr_t)(void *)h; }

/* slot index and generation of h; 0 when h cannot be a handle */
static int decode(brisk_session *h, unsigned *i, uintptr_t *gen) {
    uintptr_t v = handle_bits(h);
    if (!(v & 1)) return 0;
    *i = (unsigned)((v >> 1) & (MAX_SESSIONS - 1));
    *gen = v >> (SLOT_BITS + 1);
    return *gen != 0;
}

/* Under table_lock: the session h names (*s), or why it names none. */
static const char *resolve(brisk_session *h, api_session **s) {
    *s = NULL;
    if (!h) return null_msg;
    unsigned i;
    uintptr_t gen;
    if (!decode(h, &i, &gen)) return not_handle_msg;
    uintptr_t st = atomic_load_explicit(&table[i].state, memory_order_acquire);
    if (st == (gen << 1 | 1)) {
        *s = table[i].s;
        return NULL;
    }
    return gen <= st >> 1 ? destroyed_msg : not_handle_msg;
}

brisk_session *api_handle_new(api_session *s) {
    pthread_mutex_lock(&table_lock);
    brisk_session *h = NULL;
    /* round robin, so that a slot is reused as late as possible */
    for (unsigned k = 0; k < MAX_SESSIONS && !h; k++) {
        unsigned i = (next_slot + k) % MAX_SESSIONS;
        uintptr_t st = atomic_load_explicit(&table[i].state, memory_order_relaxed);
        if (st & 1) continue;
        uintptr_t gen = (st >> 1) + 1;
        if (gen > (UINTPTR_MAX >> (SLOT_BITS + 1))) continue; /* worn out (2^19 sessions on 32 bits) */
        s->slot = i, s->gen = gen;
        table[i].s = s;
        atomic_store_explicit(&table[i].state, gen << 1 | 1, memory_order_release);
        next_slot = i + 1;
        h = (brisk_session *)(void *)(gen << (SLOT_BITS + 1) | (uintptr_t)i << 1 | 1);
    }
    pthread_mutex_unlock(&table_lock);
    return h;
}

static int holds(const api_session *s) {
    for (int i = 0; i < n_held; i++)
        if (held[i] == s) return 1;
    return 0;
}

static brisk_status busy(api_call *c, const char *what) {
    return brisk_errorf(&c->err, BRISK_BUSY, "%s cannot run inside a callback of a running brisk call on this "
                        "thread (it would wait for the call it is inside); return from the callback first, or "
                        "do it from another thread", what);
}

api_session *api_handle_retire(brisk_session *h, const char **why) {
    pthread_mutex_lock(&table_lock);
    api_session *s;
    *why = resolve(h, &s);
    if (s && holds(s)) {
        *why = "destroy: called inside a callback of a running call on this session (its log callback); destroy "
               "it after that call returns";
        s = NULL;
    } else if (s) {
        /* New calls are refused from now on; those already in (running, or waiting for the
         * session's mutex) end first. */
        atomic_store_explicit(&table[s->slot].state, s->gen << 1, memory_order_release);
        atomic_store_explicit(&s->dying, 1, memory_order_relaxed);
        while (s->calls > 0) pthread_cond_wait(&calls_ended, &table_lock);
        table[s->slot].s = NULL;
    }
    pthread_mutex_unlock(&table_lock);
    return s;
}

brisk_status api_enter(brisk_session *h, api_call *c, api_mode mode) {
    fegetenv(&c->fe);
    c->h = h, c->s = NULL, c->locked = 0;
    c->err.code = BRISK_OK;
    c->err.msg[0] = 0;
    api_session *s;
    pthread_mutex_lock(&table_lock);
    if (!resolve(h, &s) && s->ready) s->calls++;
    else s = NULL;
    pthread_mutex_unlock(&table_lock);
    if (!s) return BRISK_ERR_INVALID; /* brisk_session_error(h) says why */
    c->s = s;
    if (mode == API_FREE || (mode == API_READ && holds(s))) return BRISK_OK;
    if (mode == API_WORK && n_held > 0) return busy(c, "training, predicting, sampling, saving or loading");
    if (n_held == HELD_MAX) return busy(c, "a call nested this deep");
    pthread_mutex_lock(&s->lock);
    c->locked = 1;
    held[n_held++] = s;
    if (atomic_load_explicit(&s->dying, memory_order_relaxed))
        return brisk_errorf(&c->err, BRISK_ERR_INVALID, "%s (while this call waited for another to end)",
                            destroyed_msg);
    return BRISK_OK;
}

/* Keeps this thread's message for h ("" after a success). */
static void keep_error(brisk_session *h, brisk_status st, const brisk_error *e) {
    thread_errors *all = thread_messages(st != BRISK_OK);
    if (!all) return;
    thread_error *t = NULL;
    for (int i = 0; i < THREAD_ERRORS && !t; i++)
        if (all->e[i].h == h) t = &all->e[i];
    if (!t) {
        if (st == BRISK_OK) return;
        t = &all->e[all->next++ % THREAD_ERRORS];
        t->h = h;
    }
    t->e.code = st;
    snprintf(t->e.msg, sizeof t->e.msg, "%s", st == BRISK_OK ? "" : e->msg);
}

brisk_status api_leave(api_call *c, brisk_status st) {
    api_session *s = c->s;
    if (s) {
        keep_error(c->h, st, &c->err);
        if (c->locked) {
            n_held--;
            pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_lock(&table_lock);
        if (--s->calls == 0 && atomic_load_explicit(&s->dying, memory_order_relaxed))
            pthread_cond_broadcast(&calls_ended);
        pthread_mutex_unlock(&table_lock);
    }
    fesetenv(&c->fe);
    return st;
}

int api_stop_requested(const api_session *s) {
    return atomic_load_explicit(&table[s->slot].stop, memory_order_relaxed) == s->gen;
}

void api_stop_clear(const api_session *s) {
    uintptr_t gen = s->gen;
    atomic_compare_exchange_strong_explicit(&table[s->slot].stop, &gen, 0, memory_order_relaxed,
                                            memory_order_relaxed);
}

/* Async-signal-safe: atomic loads and one atomic store, no lock, nothing else touched. */
brisk_status brisk_session_request_stop(brisk_session *h) {
    unsigned i;
    uintptr_t gen;
    if (!h || !decode(h, &i, &gen)) return BRISK_ERR_INVALID;
    if (atomic_load_explicit(&table[i].state, memory_order_acquire) != (gen << 1 | 1)) return BRISK_ERR_INVALID;
    atomic_store_explicit(&table[i].stop, gen, memory_order_relaxed);
    return BRISK_OK;
}

/* Installing clears a pending signal and re-arms handlers that a caught signal reset
 * (SA_RESETHAND); a second session must do neither. */
static brisk_status install_unless_caught(void) {
    if (brisk_signal_pending()) return BRISK_OK;
    brisk_error ignored;
    return brisk_signals_install(&ignored);
}

brisk_status brisk_stop_signals_install(void) {
    pthread_mutex_lock(&table_lock);
    program_signals = 1;
    brisk_status st = install_unless_caught();
    pthread_mutex_unlock(&table_lock);
    return st;
}

brisk_status api_signals_acquire(void) {
    pthread_mutex_lock(&table_lock);
    brisk_status st = signal_sessions == 0 ? install_unless_caught() : BRISK_OK;
    if (!st) signal_sessions++;
    pthread_mutex_unlock(&table_lock);
    return st;
}

void api_signals_release(void) {
    pthread_mutex_lock(&table_lock);
    if (--signal_sessions == 0 && !program_signals) brisk_signals_restore();
    pthread_mutex_unlock(&table_lock);
}

brisk_status brisk_session_clear_stop(brisk_session *h) {
    api_call c;
    brisk_status st = api_enter(h, &c, API_FREE);
    if (!st) {
        api_stop_clear(c.s);
        pthread_mutex_lock(&table_lock);
        if (!brisk_signal_pending()) {
        } else if (brisk_signals_installed()) {
            brisk_error ignored;
            st = brisk_signals_install(&ignored); /* clears it, and re-arms what the signal reset */
            if (st) st = brisk_errorf(&c.err, st, "clear_stop: cannot re-install brisk's signal handlers");
        } else {
            brisk_signal_clear();
        }
        pthread_mutex_unlock(&table_lock);
    }
    return api_leave(&c, st);
}

int brisk_stop_signal(void) { return brisk_signal_pending(); }

const char *brisk_session_error(const brisk_session *ch) {
    brisk_session *h = (brisk_session *)ch;
    api_session *s;
    pthread_mutex_lock(&table_lock);
    const char *msg = resolve(h, &s);
    /* a failed creation's message is written once, before the handle is returned */
    if (!msg && !s->ready) msg = s->err.msg;
    pthread_mutex_unlock(&table_lock);
    if (msg) return msg;
    thread_errors *all = thread_messages(0);
    for (int i = 0; all && i < THREAD_ERRORS; i++)
        if (all->e[i].h == h) return all->e[i].e.msg;
    return "";
}
