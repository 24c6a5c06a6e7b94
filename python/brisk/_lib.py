"""libbrisk.so through ctypes: where it is found, the C signatures, errors and log messages.

The library is the one beside this file (a `pip install ./python`), or the one named by the
BRISK_LIBRARY environment variable (a CMake build's build/libbrisk.so, as the tests use).
"""
import contextlib
import ctypes
import logging
import os
import signal
import threading

_STATUS = ["ok", "invalid", "io", "format", "shape", "nomem", "unsupported", "numeric", "internal",
           "full", "stopped", "busy"]
STOPPED = 10

logger = logging.getLogger("brisk")
_LEVELS = [logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG]


class BriskError(RuntimeError):
    """An error brisk reported: `status` is its name ("invalid", "io", "shape", ...), `code`
    the C status number, and the message is brisk's own, saying what was wrong."""

    def __init__(self, code, message):
        self.code = code
        self.status = _STATUS[code] if 0 <= code < len(_STATUS) else str(code)
        super().__init__(message)


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_double)

_lib = None


def _find():
    env = os.environ.get("BRISK_LIBRARY")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libbrisk.so")
    if os.path.exists(here):
        return here
    raise ImportError("brisk: libbrisk.so not found beside the package (%s); install the package with "
                      "`pip install ./python` from brisk's repository, or set BRISK_LIBRARY to a built "
                      "libbrisk.so (cmake --build build: build/libbrisk.so)" % here)


def lib():
    """The loaded library, with every function's signature declared (once)."""
    global _lib
    if _lib is not None:
        return _lib
    L = ctypes.CDLL(_find())
    P, i64, f32p = ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_float)
    S = ctypes.c_int
    sigs = {
        "brisk_session_create": (S, [ctypes.c_char_p, LOG_FN, P, ctypes.POINTER(P)]),
        "brisk_session_create_file": (S, [ctypes.c_char_p, LOG_FN, P, ctypes.POINTER(P)]),
        "brisk_session_destroy": (S, [P]),
        "brisk_session_error": (ctypes.c_char_p, [P]),
        "brisk_session_sizes": (S, [P, ctypes.POINTER(i64), ctypes.POINTER(i64)]),
        "brisk_session_push": (S, [P, i64, f32p, i64, f32p, i64]),
        "brisk_session_clear": (S, [P]),
        "brisk_session_train_epochs": (S, [P, i64]),
        "brisk_session_train_steps": (S, [P, i64]),
        "brisk_session_save": (S, [P, ctypes.c_char_p]),
        "brisk_session_load": (S, [P, ctypes.c_char_p]),
        "brisk_session_predict": (S, [P, i64, f32p, i64, f32p, i64]),
        "brisk_session_sample_guided": (S, [P, i64, f32p, i64, f32p, i64, f32p, i64, ctypes.c_int, ctypes.c_int,
                                            ctypes.c_double, ctypes.c_uint64]),
        "brisk_session_query": (S, [P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)]),
        "brisk_session_request_stop": (S, [P]),
        "brisk_session_clear_stop": (S, [P]),
        "brisk_train_run": (S, [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                                ctypes.c_char_p, ctypes.c_int, LOG_FN, P, PROGRESS_FN, P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                ctypes.c_size_t]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    _lib = L
    return L


@contextlib.contextmanager
def ctrl_c_stops(on_interrupt):
    """For the duration of a brisk call: Ctrl-C calls on_interrupt() (which asks brisk to stop
    after its step, with a checkpoint, and has the caller raise KeyboardInterrupt when the call
    has returned) instead of raising KeyboardInterrupt inside one of brisk's callbacks, where it
    cannot cross the C frames beneath. Only where Python's own SIGINT handler is in place (the
    main thread, no handler of the program's): elsewhere the callbacks catch what arrives."""
    if (threading.current_thread() is not threading.main_thread() or
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    signal.signal(signal.SIGINT, lambda _sig, _frame: on_interrupt())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def make_log(log, on_interrupt=None):
    """The C log callback for `log`: a callable (level name, message), or None for the
    logging module's "brisk" logger.

    A callback must return to brisk (an exception cannot cross the C frames under it): Ctrl-C
    arrives in it as KeyboardInterrupt whenever brisk calls back while the user presses it, and
    is handed to on_interrupt() instead, whose caller stops the run and raises it afterwards;
    an exception from the user's own log function is logged and dropped."""

    def cb(_user, level, msg):
        try:
            text = msg.decode("utf-8", "replace")
            lv = _LEVELS[level] if 0 <= level < len(_LEVELS) else logging.INFO
            if log is None:
                logger.log(lv, "%s", text)
            else:
                log(logging.getLevelName(lv).lower(), text)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt()
        except Exception as e:  # noqa: BLE001 - a log function's failure must not end the run
            logger.warning("brisk: the log function raised %r; message dropped", e)

    return LOG_FN(cb)
