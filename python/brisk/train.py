"""brisk.train: a whole `brisk train` run (brisk_train_run in include/brisk/api.h), with a
progress bar: tqdm's (tqdm.auto: a widget in notebooks) when tqdm is importable, else one
plain line rewritten in place on a terminal."""
import ctypes
import json
import math
import os
import sys

from . import _lib
from ._lib import BriskError
from .session import _config_text


class _PlainBar:
    """The fallback bar: `step 120/400 [####......] loss 0.4312`, on one line of stderr."""

    def __init__(self, total, desc):
        self.total, self.n, self.desc, self.loss = total, 0, desc, None
        self.tty = sys.stderr.isatty()

    def update(self, k):
        self.n += k
        width = 30
        done = int(width * self.n / self.total) if self.total else width
        loss = "" if self.loss is None else "  loss %.5g" % self.loss
        line = "%s %d/%d [%s%s]%s" % (self.desc, self.n, self.total, "#" * done, "." * (width - done), loss)
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        sys.stderr.flush()

    def set_postfix(self, **kw):
        self.loss = kw.get("loss")

    def close(self):
        if self.tty:
            sys.stderr.write("\n")


def _bar(total, desc):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _PlainBar(total, desc)
    return tqdm(total=total, desc=desc, unit="step")


def train(config, overrides=None, resume=None, overwrite=False, progress=True, log=None):
    """Trains the model a config describes, as `brisk train CONFIG --set KEY=VALUE ...` does.

    config: a dict, a path to a JSON config (relative data paths resolved from its folder) or
    JSON text. overrides: {"train.epochs": 3, ...} or ["train.epochs=3", ...]. resume: a
    checkpoint to continue from, or "auto" (the newest in the run directory; a fresh start when
    it has none). overwrite=True replaces a previous run in train.out_dir. progress: a bar
    (True), or False. log: as brisk.Session's (None: the logging module's "brisk" logger).

    Returns (summary, checkpoint): summary is a dict with the keys of metrics.jsonl's run_end
    line (steps, epochs, final_loss, best_val_loss and best_val_accuracy over every resumed part of
    the run, run_best_val_loss for this call's part, wall_s,
    ms_per_step_median, samples_per_s, params, stopped_by_signal, checkpoint, ...; None where
    nothing was measured) and out_dir, and checkpoint the newest checkpoint's path ("" when the
    config sets no train.out_dir). A config with "models" returns ({"models": {...}}, None).
    Ctrl-C stops the run after its step in progress (at brisk's next call back: a progress
    line, every train.log_every steps), writes its checkpoint, and then raises
    KeyboardInterrupt, as a notebook user expects. Errors raise BriskError with brisk's message.
    """
    text, is_path = _config_text(config)
    if isinstance(overrides, dict):
        overrides = ["%s=%s" % (k, json.dumps(v) if not isinstance(v, str) else v) for k, v in overrides.items()]
    elif overrides is not None and (not isinstance(overrides, (list, tuple)) or
                                    not all(isinstance(o, str) for o in overrides)):
        raise TypeError("brisk: overrides must be a dict {key: value} or a list of \"key=value\" strings")
    overrides = list(overrides or [])
    arr = (ctypes.c_char_p * max(1, len(overrides)))(*[o.encode() for o in overrides])
    state = {"bar": None, "step": 0, "interrupted": False}

    def on_interrupt():
        state["interrupted"] = True

    def on_progress(_user, step, total, loss):
        try:
            if progress:
                if state["bar"] is None:
                    state["bar"] = _bar(int(total), "brisk")
                bar = state["bar"]
                if not math.isnan(loss):
                    bar.set_postfix(loss=float("%.5g" % loss))
                bar.update(int(step) - state["step"])
                state["step"] = int(step)
        except KeyboardInterrupt:
            on_interrupt()
        except Exception as e:  # noqa: BLE001 - a broken bar must not end the run
            _lib.logger.warning("brisk: the progress bar raised %r", e)
        return 1 if state["interrupted"] else 0  # nonzero: stop after this step, with a checkpoint

    # the progress callback is passed even without a bar: it is how Ctrl-C stops the run
    log_cb = _lib.make_log(log, on_interrupt)
    prog_cb = _lib.PROGRESS_FN(on_progress)
    result = ctypes.create_string_buffer(1 << 16)
    error = ctypes.create_string_buffer(2048)
    try:
        with _lib.ctrl_c_stops(on_interrupt):
            st = _lib.lib().brisk_train_run(text.encode(), int(is_path), arr, len(overrides),
                                            None if resume is None else os.fspath(resume).encode(),
                                            int(bool(overwrite)), log_cb, None, prog_cb,
                                            None, result, len(result), error, len(error))
    finally:
        if state["bar"] is not None:
            state["bar"].close()
    if state["interrupted"]:
        raise KeyboardInterrupt
    if st and st != _lib.STOPPED:
        raise BriskError(st, error.value.decode("utf-8", "replace"))
    summary = json.loads(result.value.decode())
    return summary, summary.get("checkpoint")
