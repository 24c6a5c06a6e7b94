"""`brisk export CKPT --onnx FILE`: ONNX Runtime loads the model and its outputs equal `brisk
predict`'s to 1e-5 for mlp (classifier and regressor), lstm (also bidirectional, mean pool),
a graph model's GRU (one way and both), transformer (pre- and post-norm, causal, learned and sinusoidal positions), the ResNet keypoint
regressors (18 and 34 with BasicBlock, 50 with Bottleneck; BatchNorm in inference with the
trained running statistics) and the meshgnn (its graph's gathers and segment sums; the change
in the fields' units, to 1e-5 of each channel's scale); the diffusion denoiser's equal a
float64 NumPy forward of the checkpoint's weights (brisk predict does not run a denoiser).
Skipped without onnxruntime (build/pydeps)."""
import json
import subprocess

import numpy as np
import pytest

import brisk

ort = pytest.importorskip("onnxruntime")

FEATS = ["ret_1", "ret_8", "dev_16", "vol_32", "hour_sin"]


def run(*args, ok=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    assert (r.returncode == 0) == ok, r.stdout + r.stderr
    return r


def session(model):
    """ONNX Runtime on the CPU over a file (path) or the model's bytes."""
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), providers=["CPUExecutionProvider"])


def onnx_run(path, feeds):
    s = session(path)
    assert [o.name for o in s.get_outputs()] == ["output"]
    return s.run(None, feeds)[0], s


def train(brisk_bin, tmp_path, name, cfg):
    (tmp_path / (name + ".json")).write_text(json.dumps(cfg))
    run(brisk_bin, "train", str(tmp_path / (name + ".json")), "--quiet")
    return str(tmp_path / name / "last.safetensors")


def predict(brisk_bin, tmp_path, ckpt, x):
    """What `brisk predict` gives for x (rows)."""
    np.save(tmp_path / "x.npy", x)
    run(brisk_bin, "predict", ckpt, "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"))
    return np.load(tmp_path / "y.npy")


def export_and_compare(brisk_bin, tmp_path, ckpt, x, tol=1e-5, extra=()):
    ref = predict(brisk_bin, tmp_path, ckpt, x)
    out = tmp_path / "m.onnx"
    run(brisk_bin, "export", ckpt, "--onnx", str(out), *extra)
    y, s = onnx_run(out, {"x": x})
    assert y.shape == ref.shape and s.get_inputs()[0].shape[0] == "N"
    err = np.abs(y - ref).max()
    assert err < tol, err
    return out


@pytest.fixture
def series(tmp_path, brisk_bin):
    run(brisk_bin, "synth", "series", str(tmp_path / "series.npz"), "--samples", "600")
    z = np.load(tmp_path / "series.npz")
    feats = np.stack([z[f] for f in FEATS], axis=1).astype(np.float32)
    windows = np.stack([feats[k:k + 12] for k in range(0, 580, 29)])  # raw windows [20, 12, 5]
    return tmp_path / "series.npz", windows


def seq_config(data, model, out, target=None):
    t = target or {"column": "close", "thresholds": [-0.001, 0.001]}
    return {"model": dict(model, inputs=5, seq_len=12), "data": {
        "train": str(data), "validation_fraction": 0.2,
        "windows": {"features": FEATS, "length": 12, "horizon": 3, "target": t}},
        "train": {"batch_size": 32, "max_steps": 4, "out_dir": out}}


def test_mlp_classifier_and_regressor(tabular, tmp_path, brisk_bin):
    x = np.random.default_rng(0).standard_normal((37, 64)).astype(np.float32)
    base = {"data": {"train": str(tabular)}, "train": {"batch_size": 64, "epochs": 1}}
    cls = dict(base, model={"type": "mlp", "inputs": 64, "hidden": [32, 16], "outputs": 3, "dropout": 0.1})
    cls["train"] = dict(base["train"], out_dir=str(tmp_path / "cls"))
    ckpt = train(brisk_bin, tmp_path, "cls", cls)
    export_and_compare(brisk_bin, tmp_path, ckpt, x)
    # --fp16: fp16 weights, outputs within the weights' rounding
    export_and_compare(brisk_bin, tmp_path, ckpt, x, tol=2e-3, extra=("--fp16",))
    reg = dict(base, model={"type": "mlp", "inputs": 64, "hidden": [16], "outputs": 1, "task": "regress",
                            "activation": "gelu"})
    reg["train"] = dict(base["train"], out_dir=str(tmp_path / "reg"))
    export_and_compare(brisk_bin, tmp_path, train(brisk_bin, tmp_path, "reg", reg), x)


def test_mlp_regressor_with_data_normalize(tmp_path, brisk_bin):
    """Features x1000 + 5000 and two targets in units of 50 and 2, standardised by
    data.normalize: the exported model takes raw rows and gives the targets' units."""
    rng = np.random.default_rng(4)
    z = rng.standard_normal((512, 6)).astype(np.float32)
    y = np.stack([z[:, 0] - z[:, 1], np.tanh(z[:, 2])], 1) * np.float32([50, 2]) + np.float32([300, -7])
    np.savez(tmp_path / "raw.npz", x=z * 1000 + 5000, y=y.astype(np.float32))
    cfg = {"model": {"type": "mlp", "inputs": 6, "hidden": [16], "outputs": 2, "task": "regress"},
           "data": {"train": str(tmp_path / "raw.npz"), "normalize": True},
           "train": {"batch_size": 64, "epochs": 2, "out_dir": str(tmp_path / "norm")}}
    x = (rng.standard_normal((37, 6)) * 1000 + 5000).astype(np.float32)
    export_and_compare(brisk_bin, tmp_path, train(brisk_bin, tmp_path, "norm", cfg), x, tol=1e-3)


def test_fp16_halves_the_file(tabular, tmp_path, brisk_bin):
    cfg = {"model": {"type": "mlp", "inputs": 64, "hidden": [256], "outputs": 3}, "data": {"train": str(tabular)},
           "train": {"batch_size": 64, "epochs": 1, "out_dir": str(tmp_path / "r")}}
    ckpt = train(brisk_bin, tmp_path, "r", cfg)
    run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "a.onnx"))
    run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "b.onnx"), "--fp16")
    a, b = (tmp_path / "a.onnx").stat().st_size, (tmp_path / "b.onnx").stat().st_size
    assert b < 0.55 * a, (a, b)


@pytest.mark.parametrize("model", [
    {"type": "lstm", "hidden": 16, "layers": 2, "outputs": 3, "pool": "last"},
    {"type": "lstm", "hidden": 8, "layers": 2, "bidirectional": True, "dropout": 0.2, "pool": "mean", "outputs": 3},
    {"type": "transformer", "width": 16, "heads": 2, "ffn": 24, "layers": 2, "activation": "gelu", "norm": "pre",
     "positions": "learned", "pool": "mean", "outputs": 3, "dropout": 0.1},
    {"type": "transformer", "width": 8, "heads": 2, "ffn": 12, "layers": 2, "norm": "post", "causal": True,
     "positions": "sinusoidal", "pool": "last", "activation": "gelu_tanh", "outputs": 3},
], ids=["lstm", "lstm_bidirectional", "transformer_pre", "transformer_post_causal"])
def test_sequence_models(series, tmp_path, brisk_bin, model):
    data, windows = series
    ckpt = train(brisk_bin, tmp_path, "seq", seq_config(data, model, str(tmp_path / "seq")))
    export_and_compare(brisk_bin, tmp_path, ckpt, windows)


def test_sequence_regression_in_target_units(series, tmp_path, brisk_bin):
    data, windows = series
    model = {"type": "lstm", "hidden": 8, "layers": 1, "outputs": 1, "task": "regress", "pool": "last"}
    target = {"column": "close", "kind": "value", "change": "relative"}
    ckpt = train(brisk_bin, tmp_path, "sr", seq_config(data, model, str(tmp_path / "sr"), target))
    export_and_compare(brisk_bin, tmp_path, ckpt, windows)


def test_diffusion_denoiser(tmp_path, brisk_bin):
    run(brisk_bin, "synth", "diffusion", str(tmp_path / "d.npz"), "--samples", "256")
    cfg = {"model": {"type": "diffusion", "fine": 256, "coarse": 7, "time_embedding": 32, "hidden": [64, 64],
                     "noise": {"steps": 50}}, "data": {"train": str(tmp_path / "d.npz")},
           "train": {"batch_size": 32, "max_steps": 3, "out_dir": str(tmp_path / "d")}}
    ckpt = train(brisk_bin, tmp_path, "d", cfg)
    run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "d.onnx"))
    rng = np.random.default_rng(2)
    coarse = rng.standard_normal((9, 7)).astype(np.float32)
    xt = rng.standard_normal((9, 256)).astype(np.float32)
    t = rng.integers(0, 50, 9).astype(np.int32)
    s = session(tmp_path / "d.onnx")
    assert sorted(i.name for i in s.get_inputs()) == ["coarse", "t", "x_t"]
    y = s.run(None, {"coarse": coarse, "x_t": xt, "t": t})[0]
    # the reference: bench/reference/models.py's Denoiser forward in float64 on brisk.load's weights
    w = {k: v.astype(np.float64) for k, v in brisk.load(ckpt, numpy=True).items()}
    half = 16
    f = np.exp(-np.log(10000.0) * np.arange(half) / half)
    a = t[:, None].astype(np.float64) * f[None, :]
    h = np.concatenate([xt, coarse, np.sin(a), np.cos(a)], axis=1)
    for i in (0, 2):
        h = h @ w["net.%d.weight" % i].T + w["net.%d.bias" % i]
        h = h / (1 + np.exp(-h))
    ref = h @ w["net.4.weight"].T + w["net.4.bias"]
    assert y.shape == (9, 256)
    assert np.abs(y - ref).max() < 1e-5, np.abs(y - ref).max()


@pytest.fixture
def images(tmp_path, brisk_bin):
    run(brisk_bin, "synth", "images", str(tmp_path / "img"), "--samples", "40")
    return tmp_path / "img"


@pytest.mark.parametrize("depth", [18, 34, 50])
def test_resnet_keypoints(images, tmp_path, brisk_bin, depth):
    # 32 x 32 (resized from the 64 x 64 PNGs) keeps the deeper nets quick; 3 steps move the
    # running statistics off their initial 0 and 1, so inference's BatchNorm is exercised
    cfg = {"model": {"type": "resnet", "depth": depth, "keypoints": 4, "channels": 3},
           "data": {"images": {"labels": str(images / "labels.csv"), "size": [32, 32], "resize": True,
                               "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}, "validation_fraction": 0.2},
           "train": {"batch_size": 8, "max_steps": 3, "out_dir": str(tmp_path / "rn")}}
    ckpt = train(brisk_bin, tmp_path, "rn", cfg)
    w = brisk.load(ckpt, numpy=True)
    assert np.abs(w["stem.1.running_var"] - 1).max() > 1e-3 and np.abs(w["stem.1.running_mean"]).max() > 1e-3
    x = np.random.default_rng(depth).standard_normal((5, 3, 32, 32)).astype(np.float32)
    ref = predict(brisk_bin, tmp_path, ckpt, x)  # [N, 2K]: brisk predict writes rows
    variants = [((), 1e-5)] + ([(("--fp16",), 2e-3)] if depth == 18 else [])
    for extra, tol in variants:
        run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "m.onnx"), *extra)
        y, s = onnx_run(tmp_path / "m.onnx", {"x": x})
        assert s.get_inputs()[0].shape == ["N", 3, 32, 32] and y.shape == (5, 4, 2)
        err = np.abs(y.reshape(ref.shape) - ref).max()
        assert err < tol, (extra, err)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["gru", "gru_bidirectional"])
def test_graph_gru(series, tmp_path, brisk_bin, bidirectional):
    """A graph model's GRUs (2 layers, one way or both, reverse halves included) as ONNX's GRU
    with linear_before_reset, a regressor over raw windows: the target's units come back."""
    data, windows = series
    layers = [{"name": "rnn", "op": "gru", "inputs": ["x"], "hidden": 8, "layers": 2,
               "bidirectional": bidirectional, "dropout": 0.1},
              {"name": "last", "op": "slice", "inputs": ["rnn"], "dim": 1, "start": 11, "length": 1},
              {"name": "flat", "op": "flatten", "inputs": ["last"]},
              {"name": "head", "op": "linear", "inputs": ["flat"], "out": 1}]
    cfg = {"model": {"type": "graph", "inputs": [{"name": "x", "shape": [12, 5]}, {"name": "y", "shape": [1]}],
                     "layers": layers, "outputs": ["head"], "losses": [{"output": "head", "target": "y", "type": "mse"}]},
           "data": {"train": str(data), "validation_fraction": 0.2,
                    "windows": {"features": FEATS, "length": 12, "horizon": 3,
                                "target": {"column": "close", "kind": "change", "change": "relative"}}},
           "train": {"batch_size": 32, "max_steps": 4, "out_dir": str(tmp_path / "gru")}}
    export_and_compare(brisk_bin, tmp_path, train(brisk_bin, tmp_path, "gru", cfg), windows)


def test_graph_model(images, tmp_path, brisk_bin):
    """A graph model (conv, group norm, upsampling, a transposed convolution, pools, BatchNorm,
    two heads): ONNX Runtime gives what brisk predict gives, the first output's values."""
    layers = [{"name": "c1", "op": "conv2d", "inputs": ["x"], "out": 8, "kernel": 3, "padding": 1},
              {"name": "n1", "op": "group_norm", "inputs": ["c1"], "groups": 2},
              {"name": "a1", "op": "leaky_relu", "inputs": ["n1"]},
              {"name": "p1", "op": "maxpool2d", "inputs": ["a1"], "kernel": 2},
              {"name": "u1", "op": "upsample", "inputs": ["p1"], "scale": 2},
              {"name": "t1", "op": "conv_transpose2d", "inputs": ["p1"], "out": 8, "kernel": 2, "stride": 2},
              {"name": "cat", "op": "concat", "inputs": ["a1", "u1", "t1"], "dim": 1},
              {"name": "bn", "op": "batchnorm", "inputs": ["cat"], "relu": True},
              {"name": "gap", "op": "global_avgpool", "inputs": ["bn"]},
              {"name": "classes", "op": "linear", "inputs": ["gap"], "out": 3},
              {"name": "corners.0", "op": "linear", "inputs": ["gap"], "out": 8},
              {"name": "corners", "op": "reshape", "inputs": ["corners.0"], "shape": [4, 2]}]
    cfg = {"model": {"type": "graph", "inputs": [{"name": "x", "shape": [3, 32, 32]},
                                                 {"name": "category", "shape": [], "dtype": "i32"},
                                                 {"name": "y", "shape": [4, 2]}],
                     "layers": layers, "outputs": ["classes", "corners"],
                     "losses": [{"output": "classes", "target": "category", "type": "cross_entropy"},
                                {"output": "corners", "target": "y", "type": "mse"}]},
           "data": {"images": {"labels": str(images / "labels.csv"), "size": [32, 32], "resize": True}},
           "train": {"batch_size": 8, "max_steps": 3, "out_dir": str(tmp_path / "g")}}
    ckpt = train(brisk_bin, tmp_path, "g", cfg)
    x = np.random.default_rng(4).standard_normal((5, 3, 32, 32)).astype(np.float32)
    export_and_compare(brisk_bin, tmp_path, ckpt, x)


def test_graph_model_math(images, tmp_path, brisk_bin):
    """The elementwise math ops, the parameterised activations and bilinear upsampling."""
    chain = [("c", "conv2d", ["x"], {"out": 4, "kernel": 3, "padding": 1}),
             ("up", "upsample", ["c"], {"scale": 2, "mode": "bilinear"}),
             ("p", "avgpool2d", ["up"], {"kernel": 2}),
             ("e", "elu", ["p"], {"alpha": 0.7}), ("s", "softplus", ["p"], {"beta": 2, "threshold": 1}),
             ("l", "leaky_relu", ["p"], {"negative_slope": 0.2}),
             ("ab", "abs", ["l"], {}), ("cl", "clamp", ["ab"], {"min": 0.05, "max": 2.0}),
             ("lg", "log", ["cl"], {}), ("ex", "exp", ["lg"], {}), ("sq", "sqrt", ["ex"], {}),
             ("pw", "pow", ["sq"], {"exponent": 3}), ("mn", "minimum", ["pw", "s"], {}),
             ("mx", "maximum", ["mn", "e"], {}), ("g", "global_avgpool", ["mx"], {}),
             ("h", "linear", ["g"], {"out": 8}), ("out", "reshape", ["h"], {"shape": [4, 2]})]
    layers = [dict(name=n, op=op, inputs=i, **a) for n, op, i, a in chain]
    cfg = {"model": {"type": "graph", "inputs": [{"name": "x", "shape": [3, 32, 32]}, {"name": "y", "shape": [4, 2]}],
                     "layers": layers, "outputs": ["out"],
                     "losses": [{"output": "out", "target": "y", "type": "huber"}]},
           "data": {"images": {"labels": str(images / "labels.csv"), "size": [32, 32], "resize": True}},
           "train": {"batch_size": 8, "max_steps": 3, "out_dir": str(tmp_path / "gm")}}
    ckpt = train(brisk_bin, tmp_path, "gm", cfg)
    x = np.random.default_rng(5).standard_normal((5, 3, 32, 32)).astype(np.float32)
    ref = predict(brisk_bin, tmp_path, ckpt, x)
    run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "m.onnx"))
    y, _ = onnx_run(tmp_path / "m.onnx", {"x": x})
    assert np.abs(y.reshape(ref.shape) - ref).max() < 1e-5, np.abs(y.reshape(ref.shape) - ref).max()


def test_meshgnn(tmp_path, brisk_bin):
    # the weather example at a small size: 16 x 16 grid, 4 x 4 mesh; the graph (edge indices
    # as initializers, segment sums as ScatterND add) comes from the data's grid
    run(brisk_bin, "synth", "weather", str(tmp_path / "w.nc"), "--samples", "120")
    cfg = {"model": {"type": "meshgnn", "inputs": 20, "outputs": 8, "mesh": [4, 4], "latent": 16, "layers": 2},
           "data": {"train": str(tmp_path / "w.nc"), "validation_fraction": 0.2,
                    "netcdf": {"variables": ["t2m", "msl", "t", "z"], "static": ["orography", "lsm"],
                               "history": 2, "lead": 1, "time_features": True}},
           "train": {"batch_size": 4, "max_steps": 3, "out_dir": str(tmp_path / "g")}}
    ckpt = train(brisk_bin, tmp_path, "g", cfg)
    x = np.random.default_rng(3).standard_normal((5, 256, 20)).astype(np.float32)  # normalised inputs
    ref = predict(brisk_bin, tmp_path, ckpt, x)  # the change over the lead in the fields' units
    scale = np.array(brisk.metadata(ckpt)["normalization"]["std"][-8:])  # the change's, per channel
    for extra, tol in (((), 1e-5), (("--fp16",), 2e-3)):
        run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "g.onnx"), *extra)
        s = session(tmp_path / "g.onnx")
        assert s.get_inputs()[0].shape == ["N", 256, 20] and s.get_outputs()[0].shape == ["N", 256, 8]
        for n in (5, 1):  # any batch: the copies' index offsets are made at run time
            y = s.run(None, {"x": x[:n]})[0]
            assert y.shape == ref[:n].shape
            err = (np.abs(y - ref[:n]) / scale).max()  # channels differ by 1e5 in units: tol of each one's scale
            assert err < tol, (extra, n, err)
    # the graph is the training data's grid: without that file, one error naming it
    (tmp_path / "w.nc").rename(tmp_path / "moved.nc")
    r = run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "h.onnx"), ok=False)
    assert r.returncode == 1 and "w.nc" in r.stderr and "grid" in r.stderr, r.stderr
    assert not (tmp_path / "h.onnx").exists()


def test_export_errors(tmp_path, brisk_bin, tabular):
    r = run(brisk_bin, "export", "x.safetensors", ok=False)
    assert r.returncode == 2 and "--onnx" in r.stderr
    r = run(brisk_bin, "export", str(tmp_path / "absent.safetensors"), "--onnx", str(tmp_path / "m.onnx"), ok=False)
    assert r.returncode == 1 and "absent.safetensors" in r.stderr
    cfg = {"model": {"type": "mlp", "inputs": 64, "hidden": [8], "outputs": 3}, "data": {"train": str(tabular)},
           "train": {"batch_size": 64, "max_steps": 1, "out_dir": str(tmp_path / "r")}}
    ckpt = train(brisk_bin, tmp_path, "r", cfg)
    run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "no" / "dir" / "m.onnx"))  # its folders made
    assert (tmp_path / "no" / "dir" / "m.onnx").stat().st_size > 0
    (tmp_path / "file").write_text("")
    r = run(brisk_bin, "export", ckpt, "--onnx", str(tmp_path / "file" / "m.onnx"), ok=False)
    assert r.returncode == 1 and "m.onnx: cannot create its folder" in r.stderr and "file exists and is not a folder" in r.stderr
    assert "usage: brisk export" in run(brisk_bin, "export", "--help").stdout
    r = subprocess.run([brisk_bin, "export", ckpt, "--onnx", "-"], capture_output=True)  # the model on stdout
    assert r.returncode == 0 and b"export" in r.stderr
    assert session(r.stdout).get_outputs()[0].name == "output"
