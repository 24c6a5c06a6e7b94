"""brisk.Session: the C API's calls from NumPy; arrays converted or refused, never a crash."""
import numpy as np
import pytest

import brisk

REGRESS = {"model": {"type": "mlp", "inputs": 4, "hidden": [16], "outputs": 2, "task": "regress"},
           "train": {"batch_size": 16, "seed": 3}, "data": {"validation_fraction": 0.0}}


def data(n=128):
    x = np.random.default_rng(0).standard_normal((n, 4))
    return x, np.stack([x[:, 0] + x[:, 1], x[:, 2] * 0.5], axis=1)


def test_push_train_predict_save_load(tmp_path):
    x, y = data()
    with brisk.Session(REGRESS) as s:
        assert (s.input_width, s.target_width, s.output_width) == (4, 2, 2)
        s.push(x, y)
        assert s.query("buffered") == 128
        s.train_epochs(5)
        first = s.query("train_loss")
        s.train_steps(40)
        assert s.query("steps") == 5 * 8 + 40 and s.query("train_loss") < first
        p = s.predict(x[:10])
        assert p.shape == (10, 2) and p.dtype == np.float32
        s.save(tmp_path / "m.safetensors")
    with brisk.Session(REGRESS) as t:
        t.load(tmp_path / "m.safetensors")
        np.testing.assert_array_equal(t.predict(x[:10]), p)
        assert t.query("steps") == 80


def test_arrays_are_converted():
    x, y = data()
    with brisk.Session(REGRESS) as s:
        s.push(x.astype(np.float64), y)           # float64 -> float32
        s.push(np.asfortranarray(x), y[::1])      # column-major
        s.push(x[::2], y[::2])                    # strided rows
        s.push(x[0], y[0])                        # one sample as 1-D
        s.push(x.astype(np.int32), y.astype(np.int64))
        assert s.query("buffered") == 128 * 3 + 64 + 1
        s.train_epochs(1)
        ref = s.predict(np.ascontiguousarray(x[:6], dtype=np.float32))
        np.testing.assert_array_equal(s.predict(np.asfortranarray(x[:6])), ref)
        np.testing.assert_array_equal(s.predict(x[:12:2][:, ::-1][:, ::-1]), s.predict(x[:12:2].copy()))
        np.testing.assert_array_equal(s.predict(list(map(list, x[:6]))), ref)


def test_bad_arrays_are_refused_clearly():
    x, y = data()
    with brisk.Session(REGRESS) as s:
        with pytest.raises(ValueError, match=r"input has shape \(128, 3\); expected \(n, 4\)"):
            s.push(x[:, :3], y)
        with pytest.raises(ValueError, match="128 samples .* and target 127|input has 128 samples"):
            s.push(x, y[:127])
        with pytest.raises(ValueError, match="expected \\(n, 4\\)"):
            s.predict(np.zeros((2, 2, 4)))
        with pytest.raises(TypeError, match="dtype <U1"):
            s.push(np.full((2, 4), "a"), y[:2])
        with pytest.raises(TypeError, match="required"):
            s.predict(None)
        bad = x.copy()
        bad[5, 2] = np.inf
        with pytest.raises(brisk.BriskError, match="row 5, column 2") as e:
            s.push(bad, y)
        assert e.value.status == "numeric" and s.query("buffered") == 0
        with pytest.raises(brisk.BriskError, match="buffer|samples"):
            s.train_epochs(1)                     # nothing buffered: brisk's message
        with pytest.raises(brisk.BriskError, match="unknown name .* known: steps"):
            s.query("nope")
        with pytest.raises(TypeError, match="name"):
            s.query(None)
        with pytest.raises(brisk.BriskError, match="at least 1"):
            s.train_epochs(0)
        with pytest.raises(ValueError, match="ddpm"):
            s.sample(x, method="euler")
        with pytest.raises(brisk.BriskError, match="diffusion|sampl"):
            s.sample(x)                           # an mlp does not sample
    with pytest.raises(brisk.BriskError, match="closed"):
        s.predict(x)


def test_classifier_labels_and_probabilities():
    cfg = {"model": {"type": "mlp", "inputs": 4, "hidden": [8], "outputs": 3}, "train": {"batch_size": 16}}
    x, _ = data()
    labels = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1)
    with brisk.Session(cfg) as s:
        assert (s.target_width, s.output_width) == (1, 3)
        s.push(x, labels)                         # 1-D labels: one per row
        with pytest.raises(brisk.BriskError, match="class|label|\\[0, 3\\)"):
            s.push(x[:2], [0, 7])
        s.train_epochs(2)
        p = s.predict(x[:5])
        np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)


def test_bad_config_raises_with_key():
    with pytest.raises(brisk.BriskError, match="model.hidden|hidden"):
        brisk.Session({"model": {"type": "mlp", "inputs": 4, "hidden": "x", "outputs": 2}})


def test_diffusion_sample():
    cfg = {"model": {"type": "diffusion", "fine": 8, "coarse": 3, "hidden": [16], "time_embedding": 4,
                     "noise": {"steps": 10}}, "train": {"batch_size": 16}}
    rng = np.random.default_rng(1)
    c = rng.standard_normal((64, 3)).astype(np.float32)
    f = np.repeat(c[:, :1], 8, axis=1)
    with brisk.Session(cfg) as s:
        s.push(c, f)
        s.train_epochs(2)
        a = s.sample(c[:4], steps=5, seed=7)
        b = s.sample(c[:4], steps=5, seed=7, guess=f[:4])
        assert a.shape == b.shape == (4, 8) and np.isfinite(a).all()
        np.testing.assert_array_equal(a, s.sample(np.asfortranarray(c[:4]), steps=5, seed=7))


def test_model_types_a_session_cannot_take_are_refused_at_create():
    cfg = {"model": {"type": "lstm", "inputs": 4, "outputs": 3, "seq_len": 8, "hidden": 16}}
    with pytest.raises(brisk.BriskError, match='a session trains model.type "mlp", "diffusion", or a "graph".*brisk.train'):
        brisk.Session(cfg)


def test_graph_model_with_image_samples():
    """A graph model of one input [2, 4, 4]: samples pushed and predicted in their shape (or
    flat, in C order: the same rows)."""
    cfg = {"model": {"type": "graph",
                     "inputs": [{"name": "x", "shape": [2, 4, 4]}, {"name": "y", "shape": [], "dtype": "i32"}],
                     "layers": [{"name": "c", "op": "conv2d", "inputs": ["x"], "out": 4, "kernel": 3, "padding": 1},
                                {"name": "r", "op": "relu", "inputs": ["c"]},
                                {"name": "p", "op": "global_avgpool", "inputs": ["r"]},
                                {"name": "h", "op": "linear", "inputs": ["p"], "out": 2}],
                     "outputs": ["h"], "losses": [{"output": "h", "target": "y", "type": "cross_entropy"}]},
           "train": {"batch_size": 16, "seed": 1}, "optim": {"lr": 0.01}}
    rng = np.random.default_rng(2)
    x = rng.standard_normal((96, 2, 4, 4)).astype(np.float32)
    y = (x[:, 0].mean(axis=(1, 2)) > x[:, 1].mean(axis=(1, 2))).astype(np.int64)
    with brisk.Session(cfg) as s:
        assert (s.input_width, s.target_width, s.output_width) == (32, 1, 2)
        s.push(x, y)
        s.train_epochs(3)
        p = s.predict(x[:8])
        assert p.shape == (8, 2)
        np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)
        np.testing.assert_array_equal(p, s.predict(x[:8].reshape(8, 32)))
        with pytest.raises(ValueError, match="expected \\(n, 32\\)"):
            s.predict(x[:8, :1])
        # sampling is the diffusion family's: a graph (or imported) network predicts
        with pytest.raises(brisk.BriskError, match="only a diffusion model samples.*a graph or an imported ONNX network"):
            s.sample(x[:2].reshape(2, 32))


def test_first_dropped_rows_warn():
    cfg = {"model": {"type": "mlp", "inputs": 4, "hidden": [8], "outputs": 2, "task": "regress"},
           "data": {"buffer": {"capacity": 64}}}
    seen = []
    with brisk.Session(cfg, log=lambda level, msg: seen.append((level, msg))) as s:
        x = np.zeros((50, 4))
        s.push(x, x[:, :2])
        assert not [m for lv, m in seen if "dropped" in m]
        s.push(x, x[:, :2])
        s.push(x, x[:, :2])
        warned = [m for lv, m in seen if lv == "warning" and "dropped" in m]
        assert len(warned) == 1 and "64 samples" in warned[0] and "36 so far" in warned[0], seen
        assert s.query("dropped") == 86


def test_a_checkpoint_with_data_normalize_standardises_what_a_session_is_given(tmp_path, brisk_bin):
    """A table in raw units (features x1000 + 5000, targets x50 + 300) trained by brisk.train
    with data.normalize: a session that loads its checkpoint predicts from raw inputs in the
    targets' units, as `brisk predict` does, and standardises what it is pushed too, so that
    training on raw rows continues the model instead of wrecking it."""
    import subprocess
    rng = np.random.default_rng(5)
    z = rng.standard_normal((1024, 4)).astype(np.float32)
    y = np.stack([z[:, 0] + 0.5 * z[:, 1] * z[:, 2], np.sin(z[:, 3])], 1).astype(np.float32)
    x, t = z * 1000 + 5000, y * 50 + 300
    np.savez(tmp_path / "raw.npz", x=x, y=t)
    model = {"type": "mlp", "inputs": 4, "hidden": [32, 32], "outputs": 2, "task": "regress"}
    sess = {"model": model, "train": {"batch_size": 32, "seed": 3}, "data": {"validation_fraction": 0.0}}
    cfg = {"model": model, "data": {"train": str(tmp_path / "raw.npz"), "validation_fraction": 0.2, "normalize": True},
           "train": {"batch_size": 32, "epochs": 30, "seed": 3, "out_dir": str(tmp_path / "run")}}
    _, ckpt = brisk.train(cfg, progress=False)
    np.save(tmp_path / "x.npy", x[:50])
    subprocess.run([brisk_bin, "predict", ckpt, "--input", str(tmp_path / "x.npy"), "--output",
                    str(tmp_path / "p.npy")], check=True, capture_output=True)
    ref = np.load(tmp_path / "p.npy")
    assert np.sqrt(((ref - t[:50]) ** 2).mean()) < 0.3 * t.std()  # learnt, and in the targets' units
    with brisk.Session(sess) as s:
        s.load(ckpt)
        np.testing.assert_allclose(s.predict(x[:50]), ref, rtol=1e-5, atol=1e-3)
        s.push(x, t)
        s.train_epochs(1)
        p = s.predict(x[:50])
        assert np.sqrt(((p - t[:50]) ** 2).mean()) < 0.3 * t.std()
        s.save(tmp_path / "again.safetensors")
    with brisk.Session(sess) as s:  # the statistics travel on in the session's own checkpoint
        s.load(tmp_path / "again.safetensors")
        np.testing.assert_array_equal(s.predict(x[:50]), p)
    with pytest.raises(brisk.BriskError, match="data.normalize fits a data.train file"):
        brisk.Session(dict(REGRESS, data={"normalize": True}))
