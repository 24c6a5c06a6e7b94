"""A PyTorch module through brisk and back: `brisk train --model net.onnx`, brisk.load into the
original module with strict=True (BatchNorm's num_batches_tracked added), brisk.from_torch,
and `brisk export --onnx` of the trained import run in ONNX Runtime, each against
`brisk predict` to 1e-5. Skipped without PyTorch (ONNX Runtime's part without onnxruntime)."""
import json
import shutil
import subprocess

import numpy as np
import pytest

import brisk

torch = pytest.importorskip("torch")
nn = torch.nn


def cnn():
    """Conv, BatchNorm, ReLU, pool, Linear: a classifier of 2 x 6 x 6 images into 3 classes; the
    BatchNorm's state_dict prefix is "1"."""
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4 * 3 * 3, 3))


def mlp():
    """Dropout trains in brisk and is gone from predict and the exported inference graph."""
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 2))


CNN_INPUTS = [{"name": "x", "shape": [2, 6, 6]}, {"name": "y", "shape": [], "dtype": "i32"}]
CNN_LOSSES = [{"output": "out", "target": "y", "type": "cross_entropy"}]
MLP_INPUTS = [{"name": "x", "shape": [5]}, {"name": "y", "shape": [2]}]
MLP_LOSSES = [{"output": "out", "target": "y", "type": "mse"}]


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def cnn_data(path, n=64):
    rng = np.random.default_rng(0)
    np.savez(path, x=rng.standard_normal((n, 2, 6, 6)).astype(np.float32), y=rng.integers(0, 3, n).astype(np.int32))


def mlp_data(path, n=64):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    np.savez(path, x=x, y=np.stack([x[:, 0] * x[:, 1], np.sin(x[:, 2])], 1).astype(np.float32))


def export(module, sample, path):
    """As docs/onnx.md says: training mode, opset 17, no constant folding, a dynamic batch."""
    torch.onnx.export(module, torch.randn([2] + sample), str(path), opset_version=17, input_names=["x"],
                      output_names=["out"], dynamic_axes={"x": {0: "N"}, "out": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def predict(brisk_bin, tmp_path, ckpt, x):
    np.save(tmp_path / "px.npy", x)
    run(brisk_bin, "predict", ckpt, "--input", tmp_path / "px.npy", "--output", tmp_path / "py.npy")
    return np.load(tmp_path / "py.npy")


def module_predict(module, x, classify):
    """What brisk predict writes for the module: its eval-mode output, softmax for a classifier."""
    module.eval()
    with torch.no_grad():
        out = module(torch.from_numpy(x))
    return (torch.softmax(out, 1) if classify else out).numpy()


def train_cli(brisk_bin, tmp_path, module, sample, data, inputs, losses, steps=10):
    """`brisk train --model net.onnx CONFIG`: the run directory."""
    export(module, sample, tmp_path / "net.onnx")
    cfg = {"model": {"inputs": inputs, "losses": losses}, "data": {"train": str(data), "validation_fraction": 0},
           "train": {"batch_size": 16, "max_steps": steps, "out_dir": str(tmp_path / "run")},
           "speed": {"device": "cpu"}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    run(brisk_bin, "train", "--model", tmp_path / "net.onnx", tmp_path / "c.json")
    return tmp_path / "run"


def test_cli_model_flag_errors(tmp_path, brisk_bin):
    torch.manual_seed(0)
    export(mlp(), [5], tmp_path / "net.onnx")
    r = subprocess.run([brisk_bin, "train", "--model", str(tmp_path / "net.onnx")], capture_output=True, text=True)
    assert r.returncode == 2 and "model.losses: missing" in r.stderr and "without a config, --model needs" in r.stderr
    (tmp_path / "c.json").write_text(json.dumps({"model": {"losses": MLP_LOSSES}, "data": {"train": "d.npz"}}))
    r = subprocess.run([brisk_bin, "train", "--model", str(tmp_path / "absent.onnx"), str(tmp_path / "c.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--model: model.file" in r.stderr and "absent.onnx" in r.stderr, r.stderr
    # everything from the command line: no config at all
    mlp_data(tmp_path / "d.npz")
    run(brisk_bin, "train", "--model", tmp_path / "net.onnx", "--set", "data.train=%s" % (tmp_path / "d.npz"),
        "--set", "model.inputs=" + json.dumps(MLP_INPUTS), "--set", "model.losses=" + json.dumps(MLP_LOSSES),
        "--max-steps", "3", "--out", tmp_path / "r")
    assert brisk.metadata(tmp_path / "r" / "last.safetensors")["step"] == 3


def test_cnn_strict_load_equals_predict(tmp_path, brisk_bin):
    torch.manual_seed(0)
    module = cnn()
    cnn_data(tmp_path / "d.npz")
    rundir = train_cli(brisk_bin, tmp_path, module, [2, 6, 6], tmp_path / "d.npz", CNN_INPUTS, CNN_LOSSES)
    sd = brisk.load(rundir)
    assert sd["1.num_batches_tracked"].dtype == torch.int64 and int(sd["1.num_batches_tracked"]) == 10
    assert all(isinstance(v, torch.Tensor) for v in sd.values()) and not any(k.startswith("optim.") for k in sd)
    before = module[1].running_mean.clone()
    module.load_state_dict(sd, strict=True)
    assert not torch.equal(before, module[1].running_mean)  # the trained statistics came back
    x = np.random.default_rng(2).standard_normal((7, 2, 6, 6)).astype(np.float32)
    got, want = module_predict(module, x, True), predict(brisk_bin, tmp_path, rundir / "last.safetensors", x)
    assert np.abs(got - want).max() < 1e-5, np.abs(got - want).max()
    # NumPy arrays on request, and a checkpoint file as well as its run directory
    arrays = brisk.load(rundir / "last.safetensors", numpy=True)
    assert arrays["1.num_batches_tracked"].dtype == np.int64
    assert np.array_equal(arrays["5.weight"], sd["5.weight"].numpy())
    with pytest.raises(brisk.BriskError, match="without last.safetensors or step-N"):
        brisk.load(tmp_path)


def test_from_torch(tmp_path, brisk_bin):
    torch.manual_seed(1)
    module = cnn()
    cnn_data(tmp_path / "d.npz")
    start = {k: v.clone() for k, v in module.state_dict().items()}
    cfg = {"model": {"inputs": CNN_INPUTS, "losses": CNN_LOSSES},
           "data": {"train": str(tmp_path / "d.npz"), "validation_fraction": 0},
           "train": {"batch_size": 16, "max_steps": 8, "out_dir": str(tmp_path / "ft")},
           "optim": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "speed": {"device": "cpu"}}
    summary = brisk.from_torch(module, torch.randn(4, 2, 6, 6), cfg, progress=False)
    assert summary["steps"] == 8 and (tmp_path / "ft" / "model.onnx").exists()
    assert all(torch.equal(v, module.state_dict()[k]) for k, v in start.items())  # the module is untouched
    module.load_state_dict(brisk.load(summary["out_dir"]))
    assert int(module[1].num_batches_tracked) == 8
    assert not torch.equal(start["0.weight"], module[0].weight.detach())
    x = np.random.default_rng(3).standard_normal((6, 2, 6, 6)).astype(np.float32)
    got, want = module_predict(module, x, True), predict(brisk_bin, tmp_path, summary["checkpoint"], x)
    assert np.abs(got - want).max() < 1e-5, np.abs(got - want).max()
    # a second call into the same run directory would replace the model.onnx its checkpoints name
    with pytest.raises(brisk.BriskError, match="holds a run"):
        brisk.from_torch(module, torch.randn(4, 2, 6, 6), cfg, progress=False)
    # without train.out_dir: a temporary run directory of its own; one input, named "x" by default
    lin = mlp()
    mlp_data(tmp_path / "m.npz")
    quick = {"model": {"inputs": MLP_INPUTS, "losses": MLP_LOSSES}, "data": {"train": str(tmp_path / "m.npz")},
             "train": {"batch_size": 16, "max_steps": 2}}
    done = brisk.from_torch(lin, torch.randn(3, 5), quick, progress=False)
    assert done["steps"] == 2 and "brisk-torch-" in done["out_dir"]
    lin.load_state_dict(brisk.load(done["out_dir"]), strict=True)
    shutil.rmtree(done["out_dir"])
    quick["train"]["out_dir"] = ""  # no run directory: the export's folder goes after the run
    assert brisk.from_torch(lin, torch.randn(3, 5), quick, progress=False)["steps"] == 2
    with pytest.raises(ValueError, match="2 example input"):
        brisk.from_torch(lin, (torch.randn(3, 5), torch.randn(3, 5)), quick, progress=False)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_export_import_run_to_onnxruntime(tmp_path, brisk_bin, kind):
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(2)
    if kind == "mlp":
        mlp_data(tmp_path / "d.npz")
        rundir = train_cli(brisk_bin, tmp_path, mlp(), [5], tmp_path / "d.npz", MLP_INPUTS, MLP_LOSSES)
        x = np.random.default_rng(4).standard_normal((9, 5)).astype(np.float32)
    else:
        cnn_data(tmp_path / "d.npz")
        rundir = train_cli(brisk_bin, tmp_path, cnn(), [2, 6, 6], tmp_path / "d.npz", CNN_INPUTS, CNN_LOSSES)
        x = np.random.default_rng(4).standard_normal((9, 2, 6, 6)).astype(np.float32)
    ckpt = rundir / "last.safetensors"
    run(brisk_bin, "export", ckpt, "--onnx", tmp_path / "out.onnx")
    s = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in s.get_inputs()] == ["x"]
    y = s.run(None, {"x": x})[0]
    want = predict(brisk_bin, tmp_path, ckpt, x)
    assert y.shape == want.shape and np.abs(y - want).max() < 1e-5, np.abs(y - want).max()
