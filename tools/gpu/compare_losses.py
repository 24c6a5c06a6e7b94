#!/usr/bin/env python3
"""Compares the per-step training losses of two brisk runs, from their metrics.jsonl.

  compare_losses.py REF RUN [--rtol X | --exact] [--steps N] [--label TEXT] [--verbose]
                    [--baseline BASE [--spread-factor K]]

REF and RUN are metrics.jsonl files or run directories; a directory is searched for every
metrics.jsonl below it (a pipeline writes one per model) and the two sides are paired by
relative path. Only the step lines count ("step" and "loss"; run with --log-every 1 for one
loss per step). Prints one line, PASS or FAIL with the key number, and exits 0 (pass),
1 (fail) or 2 (unreadable input or bad arguments: also a FAIL line).

--rtol X   every step's |run - ref| / |ref| must be <= X (ref is the first argument)
--exact    every step's loss must be bit-identical. brisk writes losses with %.9g, which
           round-trips a float32, so equal text is equal bits; the text is compared as written.
--steps N  each pair must have at least N common steps (default 1)
--baseline BASE  a run of REF's own code whose weights were moved by about one rounding unit
           (nudge_checkpoint.py): the model's own spread. Step s may then differ by
           max(X, K x the largest relative difference of BASE from REF up to step s), K from
           --spread-factor (default 4). A model whose training is chaotic at fp32 rounding
           (examples/resnet.json: its own spread passes 1 within 100 steps) cannot be held to
           X by any implementation that sums in another order; a smooth one's spread stays
           near 1e-7, and X holds as before.

A loss brisk wrote as null (a skipped non-finite step) equals only null; NaN never passes.
Standard library only: it runs on the GPU machine's Python and in CI.
"""
import argparse
import json
import math
import os
import sys


class InputError(Exception):
    pass


def metrics_files(path):
    """{relative path: file} for a metrics.jsonl or every metrics.jsonl under a directory."""
    if os.path.isfile(path):
        return {"": path}
    if not os.path.isdir(path):
        raise InputError(f"{path}: no such file or directory")
    found = {}
    for d, _, files in os.walk(path):
        if "metrics.jsonl" in files:
            rel = os.path.relpath(d, path)
            found["" if rel == "." else rel] = os.path.join(d, "metrics.jsonl")
    if not found:
        raise InputError(f"{path}: no metrics.jsonl in it")
    return found


def step_losses(path):
    """{step: loss text or None} from one metrics.jsonl (step lines only)."""
    losses = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                # the number's text as written, so that --exact compares what brisk wrote
                row = json.loads(line, parse_float=str, parse_int=str, parse_constant=str)
            except ValueError as e:
                raise InputError(f"{path}:{n}: not JSON ({e})")
            if not isinstance(row, dict) or "loss" not in row or "step" not in row:
                continue  # epoch lines carry train_loss/val_loss, not a step's loss
            step = int(row["step"])
            if step in losses:
                raise InputError(f"{path}:{n}: step {step} logged twice (a reused run directory?)")
            losses[step] = row["loss"]
    return losses


def as_float(t):
    return None if t is None else float(t)


def text(t):
    return "null" if t is None else t


def spread_by_step(ref, base, steps):
    """{step: the largest relative difference of base from ref up to that step}."""
    out, worst = {}, 0.0
    for s in steps:
        fa, fb = as_float(ref.get(s)), as_float(base.get(s))
        if fa is not None and fb is not None and math.isfinite(fa) and math.isfinite(fb):
            worst = max(worst, abs(fb - fa) / max(abs(fa), 1e-30))
        elif s in base:
            worst = math.inf  # the baseline itself broke down: no bound from it
        out[s] = worst
    return out


def compare_pair(name, ref_path, run_path, args, base_path=None):
    """(ok, worst relative difference or None, step of it, message) for one pair of files."""
    ref, run = step_losses(ref_path), step_losses(run_path)
    common = sorted(set(ref) & set(run))
    where = f"{name}: " if name else ""
    if len(common) < args.steps:
        return False, None, None, (f"{where}{len(common)} common steps (ref {len(ref)}, run {len(run)}), "
                                   f"need {args.steps}")
    only = sorted(set(ref) ^ set(run))
    if only:
        return False, None, None, f"{where}step {only[0]} is logged by one run only ({len(only)} such steps)"
    spread = spread_by_step(ref, step_losses(base_path), common) if base_path else None
    worst, worst_step, bad = 0.0, common[0], []
    for s in common:
        a, b = ref[s], run[s]
        if args.exact:
            if a != b:
                bad.append((s, a, b, None))
            continue
        fa, fb = as_float(a), as_float(b)
        if fa is None or fb is None:
            if (fa is None) != (fb is None):
                bad.append((s, a, b, math.inf))
                worst, worst_step = math.inf, s
            continue
        if not (math.isfinite(fa) and math.isfinite(fb)):
            bad.append((s, a, b, math.inf))
            worst, worst_step = math.inf, s
            continue
        rel = abs(fb - fa) / max(abs(fa), 1e-30)
        if rel > worst:
            worst, worst_step = rel, s
        if rel > bound(args, spread, s):
            bad.append((s, a, b, rel))
    if args.verbose:
        for s, a, b, rel in bad[:20]:
            print(f"  {where}step {s}: ref {text(a)} run {text(b)}" + ("" if rel is None else f" rel {rel:.3g}"),
                  file=sys.stderr)
    if args.exact:
        if bad:
            s, a, b, _ = bad[0]
            return False, None, s, (f"{where}step {s} differs: {text(a)} vs {text(b)} "
                                    f"({len(bad)} of {len(common)} steps differ)")
        return True, None, None, f"{where}{len(common)} steps bit-identical"
    own = ""
    if spread is not None:
        own = (f" (the model's own spread {spread[worst_step]:.3g} by then: bound "
               f"{bound(args, spread, worst_step):.3g})")
    if bad:
        s, a, b, rel = bad[0]
        first = f"first at step {s}: {text(a)} vs {text(b)} ({len(bad)} of {len(common)} steps over)"
        # with a spread-widened bound the largest difference may lie within its own step's
        # bound: then the step furthest over its bound is the verdict, not the largest
        over = max(bad, key=lambda e: e[3] / max(bound(args, spread, e[0]), 1e-300))
        if over[0] != worst_step:
            return False, worst, worst_step, (
                f"{where}step {over[0]}: rel diff {over[3]:.3g} > {bound(args, spread, over[0]):.3g} (the model's own "
                f"spread {spread[over[0]]:.3g} by then); the largest, {worst:.3g} at step {worst_step}, is within "
                f"{bound(args, spread, worst_step):.3g}; {first}")
        return False, worst, worst_step, (f"{where}max rel diff {worst:.3g} at step {worst_step} > "
                                          f"{bound(args, spread, worst_step):g}{own}; {first}")
    return True, worst, worst_step, f"{where}{len(common)} steps, max rel diff {worst:.3g} at step {worst_step}{own}"


def bound(args, spread, s):
    return args.rtol if spread is None else max(args.rtol, args.spread_factor * spread[s])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("run")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--rtol", type=float)
    how.add_argument("--exact", action="store_true")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--verbose", action="store_true", help="each differing step on stderr (20 at most)")
    ap.add_argument("--baseline")
    ap.add_argument("--spread-factor", type=float, default=4.0)
    args = ap.parse_args(argv)
    label = f"{args.label}: " if args.label else ""
    if args.rtol is not None and not (args.rtol >= 0 and math.isfinite(args.rtol)):
        print(f"FAIL {label}--rtol must be a finite number >= 0, got {args.rtol}")
        return 2
    if args.steps < 1:
        print(f"FAIL {label}--steps must be >= 1, got {args.steps}")
        return 2
    if args.baseline and (args.exact or not (args.spread_factor >= 0 and math.isfinite(args.spread_factor))):
        print(f"FAIL {label}--baseline needs --rtol and a finite --spread-factor >= 0")
        return 2
    try:
        refs, runs = metrics_files(args.ref), metrics_files(args.run)
        bases = metrics_files(args.baseline) if args.baseline else {}
        names = sorted(set(refs) | set(runs))
        if args.baseline and any(n not in bases for n in names):
            print(f"FAIL {label}{args.baseline} has no metrics.jsonl for every run compared")
            return 1
        missing = [n for n in names if n not in refs or n not in runs]
        if missing:
            side = args.ref if missing[0] not in refs else args.run
            print(f"FAIL {label}{side} has no {os.path.join(missing[0], 'metrics.jsonl')}")
            return 1
        results = [compare_pair("" if len(names) == 1 else n, refs[n], runs[n], args, bases.get(n)) for n in names]
    except (InputError, OSError) as e:
        print(f"FAIL {label}{e}")
        return 2
    failed = [r for r in results if not r[0]]
    if failed:
        print(f"FAIL {label}" + "; ".join(r[3] for r in failed))
        return 1
    if len(results) == 1:
        print(f"PASS {label}{results[0][3]}")
    elif args.exact:
        print(f"PASS {label}{len(results)} runs ({', '.join(names)}), each " + results[0][3].split(": ", 1)[1]
              + ("" if len({r[3].split(": ", 1)[1] for r in results}) == 1 else " or more"))
    else:
        worst = max(results, key=lambda r: r[1])
        print(f"PASS {label}{len(results)} runs; worst " + worst[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
