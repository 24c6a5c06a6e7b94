"""brisk.from_torch: a PyTorch module trained by brisk through ONNX, and back.

The module is exported in training mode (BatchNorm kept as BatchNormalization with its
statistics as buffers, Dropout kept; opset 17, no constant folding, so the initializers are the
state_dict's entries under their names), brisk trains the ONNX file as a model of type "onnx"
(docs/onnx.md), and `module.load_state_dict(brisk.load(run_dir))` takes the result.
"""
import copy
import os
import shutil
import tempfile

from ._lib import BriskError
from .train import train


def _names(model, n_inputs):
    """The module's input names (model.inputs' names that are no loss's target, in order; "x"
    for one input without them) and its output names (model.outputs, else the losses' outputs
    in order)."""
    targets = {l.get("target") for l in model.get("losses") or [] if isinstance(l, dict)}
    declared = [i.get("name") for i in model.get("inputs") or [] if isinstance(i, dict)]
    inputs = [n for n in declared if n not in targets]
    if not inputs:
        inputs = ["x"] if n_inputs == 1 else ["x%d" % k for k in range(n_inputs)]
    if len(inputs) != n_inputs:
        raise ValueError("brisk.from_torch: %d example input(s), but config model.inputs names %d that are no loss's "
                         "target (%s); expected one name per input of the module's forward"
                         % (n_inputs, len(inputs), ", ".join(inputs)))
    outputs = list(model.get("outputs") or [])
    for l in model.get("losses") or []:
        if isinstance(l, dict) and l.get("output") and l["output"] not in outputs and not model.get("outputs"):
            outputs.append(l["output"])
    return inputs, outputs


def export(module, example_inputs, path, input_names, output_names):
    """torch.onnx.export as brisk imports it: training mode, opset 17, no constant folding, the
    batch axis of every input and output dynamic. The module's mode is restored after."""
    import torch
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    dyn = {n: {0: "N"} for n in list(input_names) + list(output_names)}
    was_training = module.training
    # the export runs forward once in training mode: BatchNorm's statistics (and its
    # num_batches_tracked) would move, so the module keeps its state as it was
    state = copy.deepcopy(module.state_dict())
    try:
        torch.onnx.export(module, args, path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=list(input_names),
                          output_names=list(output_names) or None, dynamic_axes=dyn)
    finally:
        module.load_state_dict(state)
        module.train(was_training)
    return path


def from_torch(module, example_inputs, config, overrides=None, overwrite=False, progress=True, log=None):
    """Trains a torch.nn.Module with brisk: exports it (see export) to model.onnx in the run
    directory (train.out_dir; absent, a new temporary folder, kept; "": no run directory, the
    file in a temporary folder removed after the run), trains it as brisk.train(config) does,
    and returns brisk.train's summary (its "checkpoint" and "out_dir" keys: where the trained
    weights are). The module is not changed: load the result
    with `module.load_state_dict(brisk.load(summary["out_dir"]))`.

    example_inputs: a tensor or a tuple of tensors, a small batch (its first dim is the batch).
    config: a dict as brisk.train takes, without model.type and model.file (set here); its
    "model" gives "losses" (each "output" a name given to the module's outputs, in order),
    "inputs" (the module's inputs and the targets, with their per-sample shapes and dtypes;
    absent: one input "x", and the targets are then an error) and optionally "outputs"; and
    "data", "train", "optim" as any config. overrides, overwrite, progress, log: brisk.train's.
    """
    if not isinstance(config, dict):
        raise TypeError("brisk.from_torch: config must be a dict (its model gives inputs and losses), not %s"
                        % type(config).__name__)
    cfg = copy.deepcopy(config)
    model = cfg.setdefault("model", {})
    if not isinstance(model, dict):
        raise TypeError("brisk.from_torch: config model must be a dict of inputs, losses and outputs")
    for key in ("type", "file"):
        if key in model and not (key == "type" and model[key] == "onnx"):
            raise BriskError(3, "brisk.from_torch: config model.%s is set here (the module's ONNX export); remove it"
                             % key)
    n_inputs = len(example_inputs) if isinstance(example_inputs, (tuple, list)) else 1
    inputs, outputs = _names(model, n_inputs)
    train_cfg = cfg.setdefault("train", {})
    # the run directory decides where the ONNX file goes, so an override of it is read here
    given = overrides.items() if isinstance(overrides, dict) else \
        (o.split("=", 1) for o in overrides or [] if isinstance(o, str) and "=" in o)
    for key, value in given:
        if key == "train.out_dir":
            train_cfg["out_dir"] = value
    if "out_dir" not in train_cfg:  # a run directory of its own, kept: the trained weights are there
        train_cfg["out_dir"] = tempfile.mkdtemp(prefix="brisk-torch-")
    out_dir = train_cfg["out_dir"]
    if out_dir and not overwrite and any(os.path.exists(os.path.join(out_dir, f))
                                         for f in ("metrics.jsonl", "last.safetensors")):
        # checked before the export replaces the model.onnx that run's checkpoints name
        raise BriskError(3, "brisk.from_torch: train.out_dir %s holds a run; overwrite=True replaces it (and its "
                         "model.onnx), or give another train.out_dir" % out_dir)
    tmp = None if out_dir else tempfile.mkdtemp(prefix="brisk-onnx-")  # out_dir "": no run directory
    folder = out_dir or tmp
    try:
        os.makedirs(folder, exist_ok=True)
        path = export(module, example_inputs, os.path.join(os.path.abspath(folder), "model.onnx"), inputs, outputs)
        model["type"], model["file"] = "onnx", path
        summary, _ = train(cfg, overrides=overrides, overwrite=overwrite, progress=progress, log=log)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return summary
