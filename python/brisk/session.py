"""brisk.Session: online training from NumPy arrays, the C API's session call for call
(include/brisk/api.h): push samples, train, predict or sample, save and load.

Arrays are converted, not trusted: any real dtype becomes float32, non-contiguous or strided
arrays are copied into C order, and a wrong shape or row count raises ValueError naming the
argument and the shape expected, before anything reaches the library. brisk's own checks
(finite values, labels in range, a full buffer) raise BriskError with brisk's message.
"""
import ctypes
import json
import os

import numpy as np

from . import _lib
from ._lib import BriskError

_METHODS = {"ddpm": 0, "ddim": 1}


def _config_text(config):
    """A dict becomes JSON; a str is a file when one exists by that name, else JSON text."""
    if isinstance(config, dict):
        return json.dumps(config), False
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if os.path.exists(path) or not path.lstrip().startswith("{"):
            return path, True
        return path, False
    raise TypeError("brisk: config must be a dict, a JSON text or a path to a JSON config, not %s"
                    % type(config).__name__)


def _rows(a, width, name, what="values per sample"):
    """a as a C-contiguous float32 array of shape (n, width). A 1-D array is one sample, or
    n samples when width is 1 (a classifier's labels); (n, d1, d2, ...) with d1 d2 ... = width
    is n samples of that shape (a graph model's input)."""
    if a is None:
        raise TypeError("brisk: %s is required" % name)
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiub":
        raise TypeError("brisk: %s has dtype %s; expected real numbers (converted to float32)" % (name, arr.dtype))
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1) if width == 1 else arr.reshape(1, -1)
    elif arr.ndim > 2 and int(np.prod(arr.shape[1:])) == width:
        arr = arr.reshape(arr.shape[0], width)  # a graph model's shaped samples, in C order
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError("brisk: %s has shape %s; expected (n, %d): %d %s, one sample per row"
                         % (name, tuple(np.shape(a)), width, width, what))
    return np.ascontiguousarray(arr, dtype=np.float32)


def _ptr(arr):
    return arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


class Session:
    """A trainer with its own sample buffer (brisk_session_create).

    config: a dict (the JSON config of `brisk train`), a path to one, or JSON text.
    log: None sends brisk's messages to the logging module's "brisk" logger; a callable
    log(level, message) receives them instead.

    Ctrl-C during a call (brisk calls the log function back at its progress lines) stops a
    train call after its step with a checkpoint (train.out_dir), then raises
    KeyboardInterrupt; the session stays usable and trains again on the next call.
    """

    def __init__(self, config, log=None):
        L = _lib.lib()
        self._h = None
        self._interrupted = False
        self._log = _lib.make_log(log, self._on_interrupt)  # kept alive: the library calls it until destroy
        text, is_path = _config_text(config)
        h = ctypes.c_void_p()
        create = L.brisk_session_create_file if is_path else L.brisk_session_create
        st = create(text.encode(), self._log, None, ctypes.byref(h))
        if st:
            msg = L.brisk_session_error(h).decode("utf-8", "replace") if h.value else "out of memory"
            L.brisk_session_destroy(h)
            raise BriskError(st, msg)
        self._h = h
        self.input_width = int(self.query("input_width"))
        self.target_width = int(self.query("target_width"))
        self.output_width = int(self.query("output_width"))

    def _on_interrupt(self):
        self._interrupted = True
        if self._h is not None:
            _lib.lib().brisk_session_request_stop(self._h)

    def _call(self, name, *args):
        """brisk_session_<name>(handle, *args), Ctrl-C turned into a stop request meanwhile."""
        with _lib.ctrl_c_stops(self._on_interrupt):
            st = getattr(_lib.lib(), "brisk_session_" + name)(self._handle(), *args)
        return self._check(st)

    def _check(self, st):
        if self._interrupted:  # Ctrl-C arrived in a callback: the call stopped; now raise it
            self._interrupted = False
            if self._h is not None:
                _lib.lib().brisk_session_clear_stop(self._h)
            raise KeyboardInterrupt
        if st and st != _lib.STOPPED:
            raise BriskError(st, _lib.lib().brisk_session_error(self._handle()).decode("utf-8", "replace"))
        return st

    def _handle(self):
        if self._h is None:
            raise BriskError(1, "brisk: this session was closed")
        return self._h

    def close(self):
        """Frees the session (and unlocks its run directory). Later calls raise BriskError."""
        if self._h is not None:
            _lib.lib().brisk_session_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def push(self, input, target):
        """Adds samples to the buffer: input (n, input_width), target (n, target_width)."""
        x = _rows(input, self.input_width, "input")
        y = _rows(target, self.target_width, "target")
        if x.shape[0] != y.shape[0]:
            raise ValueError("brisk: input has %d samples (rows) and target %d; expected the same number"
                             % (x.shape[0], y.shape[0]))
        self._call("push", x.shape[0], _ptr(x), 0, _ptr(y), 0)

    def clear(self):
        """Empties the buffer (the model and optimizer state stay)."""
        self._call("clear")

    def train_epochs(self, epochs=1):
        """Trains epochs over the buffered samples; returns True when a stop request cut it short."""
        return self._call("train_epochs", int(epochs)) == _lib.STOPPED

    def train_steps(self, steps):
        """Trains optimizer steps; returns True when a stop request cut it short."""
        return self._call("train_steps", int(steps)) == _lib.STOPPED

    def predict(self, input):
        """MLP and graph models: the outputs (n, output_width) for input (n, input_width) (or
        (n, *shape) of a graph input); class probabilities for a classifier."""
        x = _rows(input, self.input_width, "input")
        out = np.empty((x.shape[0], self.output_width), dtype=np.float32)
        self._call("predict", x.shape[0], _ptr(x), 0, _ptr(out), 0)
        return out

    def sample(self, coarse, method="ddim", steps=0, eta=0.0, seed=0, guess=None):
        """Diffusion models: one fine field per coarse row, (n, output_width). method "ddpm" or
        "ddim"; steps 0: all noise steps; guess (n, output_width): start each chain from it."""
        if method not in _METHODS:
            raise ValueError("brisk: method %r; expected 'ddpm' or 'ddim'" % (method,))
        c = _rows(coarse, self.input_width, "coarse")
        g = None if guess is None else _rows(guess, self.output_width, "guess")
        if g is not None and g.shape[0] != c.shape[0]:
            raise ValueError("brisk: guess has %d rows and coarse %d; expected the same number"
                             % (g.shape[0], c.shape[0]))
        out = np.empty((c.shape[0], self.output_width), dtype=np.float32)
        self._call("sample_guided", c.shape[0], _ptr(c), 0, None if g is None else _ptr(g), 0, _ptr(out), 0,
                   _METHODS[method], int(steps), float(eta), int(seed))
        return out

    def save(self, path):
        """Writes a checkpoint (safetensors; brisk.load reads its parameters)."""
        self._call("save", os.fspath(path).encode())

    def load(self, path):
        """Loads a checkpoint of the same model (parameters, optimizer state, step)."""
        self._call("load", os.fspath(path).encode())

    def query(self, name):
        """One number by name (api.h lists them: "steps", "train_loss", "val_loss", "buffered", ...)."""
        if not isinstance(name, str):
            raise TypeError("brisk: query takes a name (str), not %s" % type(name).__name__)
        v = ctypes.c_double()
        self._call("query", name.encode(), ctypes.byref(v))
        return v.value

    def request_stop(self):
        """Asks train calls to stop after their current step, with a checkpoint."""
        self._call("request_stop")

    def clear_stop(self):
        """Withdraws a stop (request_stop, or a signal brisk's handlers caught): train calls
        train again."""
        self._call("clear_stop")
