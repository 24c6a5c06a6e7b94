/* Session handles. The brisk_session * a program holds is not the session's address but a
 * handle: a slot of a process-wide table and the generation of the session in that slot.
 * A handle used after brisk_session_destroy (easy to do: Fortran assignment copies
 * handles) finds a slot whose generation moved on, or that is empty, and the call is
 * refused with "destroyed" instead of touching freed memory. Handles are odd numbers, so
 * an address passed by mistake is told apart too.
 *
 * Stop requests live in the table beside the generation they are for, written with
 * lock-free atomic stores and no lock: brisk_session_request_stop may be called from a
 * signal handler, and a request made through a stale handle can never stop the session
 * that reuses its slot. Creating and destroying take a mutex (never a signal handler's
 * business). Besides signals.c's flag, this table is the library's only global state. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "api/internal.h"

#define SLOT_BITS 12
#define MAX_SESSIONS (1u << SLOT_BITS)

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

static const char destroyed_msg[] =
    "this session was destroyed (brisk_session_destroy): its handle, and every copy of it, can no longer be used";
static const char not_handle_msg[] =
    "not a brisk session handle (neither NULL nor a handle from brisk_session_create); the memory holding it may be "
    "uninitialised or overwritten";
static const char null_msg[] =
    "no session (NULL): none was created into this handle, or creation ran out of memory";

static uintptr_t handle_bits(brisk_session *h) { return (uintptr_t)(void *)h; }

/* slot index and generation of h; 0 when h cannot be a handle */
static int decode(brisk_session *h, unsigned *i, uintptr_t *gen) {
    uintptr_t v = handle_bits(h);
    if (!(v & 1)) return 0;
    *i = (unsigned)((v >> 1) & (MAX_SESSIONS - 1));
    *gen = v >> (SLOT_BITS + 1);
    return *gen != 0;
}

const char *api_handle_problem(brisk_session *h, api_session **s) {
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

api_session *api_handle_release(brisk_session *h, const char **why) {
    pthread_mutex_lock(&table_lock);
    api_session *s;
    *why = api_handle_problem(h, &s);
    if (s) {
        atomic_store_explicit(&table[s->slot].state, s->gen << 1, memory_order_release);
        table[s->slot].s = NULL;
    }
    pthread_mutex_unlock(&table_lock);
    return s;
}

brisk_status api_enter(brisk_session *h, api_call *c) {
    fegetenv(&c->fe);
    api_session *s;
    c->s = NULL;
    if (api_handle_problem(h, &s) || !s->ready) return BRISK_ERR_INVALID;
    c->s = s;
    s->err.code = BRISK_OK;
    s->err.msg[0] = 0;
    return BRISK_OK;
}

brisk_status api_leave(api_call *c, brisk_status st) {
    fesetenv(&c->fe);
    return st;
}

int api_stop_requested(const api_session *s) {
    return atomic_load_explicit(&table[s->slot].stop, memory_order_relaxed) == s->gen;
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

brisk_status brisk_stop_signals_install(void) {
    /* Installing clears a pending signal and re-arms handlers that a caught signal reset
     * (SA_RESETHAND); a second session must do neither. */
    if (brisk_signal_pending()) return BRISK_OK;
    brisk_error ignored;
    return brisk_signals_install(&ignored);
}

int brisk_stop_signal(void) { return brisk_signal_pending(); }

const char *brisk_session_error(const brisk_session *h) {
    api_session *s;
    const char *problem = api_handle_problem((brisk_session *)h, &s);
    return problem ? problem : s->err.msg;
}
