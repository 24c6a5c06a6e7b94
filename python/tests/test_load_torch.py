"""brisk.load and the recipe of docs/python.md: brisk weights in the PyTorch models of
bench/reference/models.py give brisk predict's outputs. Skipped without PyTorch."""
import os
import subprocess
import sys

import numpy as np
import pytest

import brisk


def test_load_names_and_optimizer(tabular, tmp_path):
    cfg = {"model": {"type": "mlp", "inputs": 64, "hidden": [16], "outputs": 3},
           "data": {"train": str(tabular)}, "train": {"batch_size": 128, "epochs": 1, "out_dir": str(tmp_path / "r")}}
    _, ckpt = brisk.train(cfg, progress=False)
    w = brisk.load(ckpt, numpy=True)
    assert {k: v.shape for k, v in w.items()} == {"net.0.weight": (16, 64), "net.0.bias": (16,),
                                                   "net.2.weight": (3, 16), "net.2.bias": (3,)}
    assert all(v.dtype == np.float32 and v.flags.writeable for v in w.values())
    full = brisk.load(ckpt, optimizer=True, numpy=True)
    assert "optim.exp_avg.net.0.weight" in full and "optim.exp_avg_sq.net.2.bias" in full
    (tmp_path / "short").write_bytes(b"\x10\x00")
    with pytest.raises(brisk.BriskError, match="shorter than the 8-byte"):
        brisk.load(tmp_path / "short")
    (tmp_path / "junk").write_bytes(b"\x04\x00\x00\x00\x00\x00\x00\x00{{{{")
    with pytest.raises(brisk.BriskError, match="not JSON"):
        brisk.load(tmp_path / "junk")
    with pytest.raises(brisk.BriskError, match="No such file"):
        brisk.load(tmp_path / "absent")


@pytest.fixture
def models():
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "reference"))
    import models
    return models


def predict(brisk_bin, tmp_path, ckpt, x):
    np.save(tmp_path / "x.npy", x)
    subprocess.run([brisk_bin, "predict", ckpt, "--input", str(tmp_path / "x.npy"), "--output",
                    str(tmp_path / "y.npy")], check=True, stdout=subprocess.DEVNULL)
    return np.load(tmp_path / "y.npy")


def test_recipe_tabular(models, tabular, tmp_path, brisk_bin):
    import torch
    cfg = {"model": {"type": "mlp", "inputs": 64, "hidden": [512, 256, 128], "outputs": 3, "dropout": 0.1},
           "data": {"train": str(tabular)}, "train": {"batch_size": 256, "epochs": 1, "out_dir": str(tmp_path / "r")}}
    _, ckpt = brisk.train(cfg, progress=False)
    x = np.random.default_rng(0).standard_normal((50, 64)).astype(np.float32)
    # the recipe (docs/python.md, "brisk weights in PyTorch")
    model = models.Tabular()
    model.load_state_dict(brisk.load(ckpt))
    model.eval()
    with torch.no_grad():
        p = torch.softmax(model.net(torch.from_numpy(x)), dim=1).numpy()
    assert np.abs(p - predict(brisk_bin, tmp_path, ckpt, x)).max() < 1e-5


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_recipe_sequence(models, tmp_path, brisk_bin, kind):
    import torch
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
    (tmp_path / "data").mkdir()
    subprocess.run([brisk_bin, "synth", "series", str(tmp_path / "data" / "series.csv"), "--samples", "400"],
                   check=True, stdout=subprocess.DEVNULL)
    _, ckpt = brisk.train(os.path.join(src, kind + ".json"), progress=False, overrides={
        "data.train": str(tmp_path / "data" / "series.csv"), "train.batch_size": 16, "train.max_steps": 2,
        "train.out_dir": str(tmp_path / kind)})
    rng = np.random.default_rng(1)
    raw = rng.standard_normal((6, 60, 32)).astype(np.float32)  # raw windows, as brisk predict takes them
    # the recipe: the model's weights, and the inputs normalised as in training
    model = models.LSTMClassifier() if kind == "lstm" else models.TransformerClassifier()
    model.load_state_dict(brisk.load(ckpt))
    model.eval()
    norm = brisk.metadata(ckpt)["normalization"]
    x = torch.from_numpy((raw - np.float32(norm["mean"])) / np.float32(norm["std"]))
    with torch.no_grad():
        if kind == "lstm":
            logits = model.head(model.lstm(x)[0][:, -1])
        else:
            logits = model.head(model.norm(model.enc(model.proj(x) + model.pos).mean(dim=1)))
    p = torch.softmax(logits, dim=1).numpy()
    assert np.abs(p - predict(brisk_bin, tmp_path, ckpt, raw)).max() < 1e-5


def test_recipe_denoiser(models, tmp_path, brisk_bin):
    import torch
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "diffusion.json")
    subprocess.run([brisk_bin, "synth", "diffusion", str(tmp_path / "d.npz"), "--samples", "128"], check=True,
                   stdout=subprocess.DEVNULL)
    _, ckpt = brisk.train(src, progress=False, overrides={"data.train": str(tmp_path / "d.npz"),
                                                          "train.batch_size": 32, "train.max_steps": 2,
                                                          "train.out_dir": str(tmp_path / "d")})
    model = models.Denoiser()
    missing = model.load_state_dict(brisk.load(ckpt), strict=False)
    assert list(missing.missing_keys) == ["abar"] and not missing.unexpected_keys  # abar: the schedule, not a weight
    # brisk's own denoiser output, through the ONNX export when onnxruntime is there
    ort = pytest.importorskip("onnxruntime")
    subprocess.run([brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "d.onnx")], check=True,
                   stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(3)
    coarse, xt = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((5, 256)).astype(np.float32)
    t = np.array([0, 7, 21, 33, 49], dtype=np.int32)
    y = ort.InferenceSession(str(tmp_path / "d.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"coarse": coarse, "x_t": xt, "t": t})[0]
    with torch.no_grad():
        ref = model.net(torch.cat([torch.from_numpy(xt), torch.from_numpy(coarse),
                                   models.sinusoidal(torch.from_numpy(t).long(), model.temb)], dim=1)).numpy()
    assert np.abs(y - ref).max() < 1e-5
