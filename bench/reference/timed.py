#!/usr/bin/env python3
"""Times PyTorch training steps of one workload of bench/WORKLOADS.md in one mode and prints one
JSON line with the keys brisk_bench prints, so that bench/run.sh and tools/gpu/summary.py can set
the two side by side:
  {"workload":..., "mode":..., "device":..., "batch":..., "params":..., "ms_per_step_median":..., ...}

Modes: eager (fp32), amp (bf16 autocast, CUDA only), compile (torch.compile; "max-autotune" on
CUDA), amp-compile. TF32 and cuDNN's autotuning are on for CUDA, since brisk uses both too. A mode
the PyTorch at hand cannot run is reported as {"skipped": why}, not as a failure.

  bench/reference/timed.py --workload diffusion --mode eager --device cpu --steps 50
  bench/reference/timed.py --workload resnet --mode amp --device cuda --steps 100
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from workloads import CLIP_NORM, WORKLOADS, build, lr, make_optimizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True, choices=WORKLOADS)
    ap.add_argument("--mode", default="eager", choices=("eager", "amp", "compile", "amp-compile"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="the small sizes of bench/WORKLOADS.md")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    a = ap.parse_args()

    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True

    model, batch, data = build(a.workload, a.small, device)
    model.train()
    opt, opt_kind = make_optimizer(model, lr(a.workload), device)
    clip = CLIP_NORM.get(a.workload)
    params = sum(p.numel() for p in model.parameters())
    result = dict(workload=a.workload, mode=a.mode, device=str(device), batch=batch, params=params,
                  small=a.small, torch=torch.__version__, optimizer=opt_kind,
                  threads=torch.get_num_threads())

    use_amp = a.mode in ("amp", "amp-compile")
    if use_amp and device.type != "cuda":
        print(json.dumps(dict(result, skipped="amp is measured on CUDA only")))
        return 0
    loss_fn = model.loss
    if a.mode in ("compile", "amp-compile"):
        if not hasattr(torch, "compile"):
            print(json.dumps(dict(result, skipped=f"torch {torch.__version__} has no torch.compile")))
            return 0
        loss_fn = torch.compile(model.loss, mode="max-autotune" if device.type == "cuda" else "default")

    def step(inputs):
        opt.zero_grad(set_to_none=True)
        if use_amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(*inputs)
        else:
            loss = loss_fn(*inputs)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss

    def sync():  # CUDA runs asynchronously: a step ends when the device is done with it
        if device.type == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    for i in range(a.warmup):
        step(data[i % len(data)])
    sync()
    result["warmup_s"] = round(time.perf_counter() - t0, 3)

    times, losses = [], []
    for i in range(a.steps):
        t = time.perf_counter()
        loss = step(data[i % len(data)])
        sync()
        times.append(time.perf_counter() - t)
        if i % 10 == 0 or i == a.steps - 1:  # a few losses: enough to see that the steps train
            losses.append(float(loss))
    med = statistics.median(times)
    result.update(ms_per_step_median=round(med * 1e3, 4), ms_per_step_min=round(min(times) * 1e3, 4),
                  samples_per_s=round(batch / med, 1), losses=[round(v, 5) for v in losses])
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
        result["max_memory_mib"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
