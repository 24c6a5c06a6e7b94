"""brisk.load and the README's recipe: brisk weights in torch_ref.py's models give brisk
predict's outputs. Skipped without PyTorch or torch_ref.py (BRISK_WORKLOADS)."""
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
    w = brisk.load(ckpt)
    assert {k: v.shape for k, v in w.items()} == {"net.0.weight": (16, 64), "net.0.bias": (16,),
                                                   "net.2.weight": (3, 16), "net.2.bias": (3,)}
    assert all(v.dtype == np.float32 and v.flags.writeable for v in w.values())
    full = brisk.load(ckpt, optimizer=True)
    assert "optim.exp_avg.net.0.weight" in full and "optim.exp_avg_sq.net.2.bias" in full
    (tmp_path / "short").write_bytes(b"\x10\x00")
    with pytest.raises(brisk.BriskError, match="shorter than the 8-byte"):
        brisk.load(tmp_path / "short")
    (tmp_path / "junk").write_bytes(b"\x04\x00\x00\x00\x00\x00\x00\x00{{{{")
    with pytest.raises(brisk.BriskError, match="not JSON"):
        brisk.load(tmp_path / "junk")
    with pytest.raises(brisk.BriskError, match="No such file"):
        brisk.load(tmp_path / "absent")


def test_recipe_torch_ref_tabular(tabular, tmp_path, brisk_bin):
    torch = pytest.importorskip("torch")
    workloads = os.environ.get("BRISK_WORKLOADS", "")
    if not os.path.exists(os.path.join(workloads, "torch_ref.py")):
        pytest.skip("torch_ref.py not found (BRISK_WORKLOADS)")
    sys.path.insert(0, workloads)
    import torch_ref

    cfg = {"model": {"type": "mlp", "inputs": 64, "hidden": [512, 256, 128], "outputs": 3, "dropout": 0.1},
           "data": {"train": str(tabular)}, "train": {"batch_size": 256, "epochs": 1, "out_dir": str(tmp_path / "r")}}
    _, ckpt = brisk.train(cfg, progress=False)
    x = np.random.default_rng(0).standard_normal((50, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([brisk_bin, "predict", ckpt, "--input", str(tmp_path / "x.npy"), "--output",
                    str(tmp_path / "y.npy")], check=True, stdout=subprocess.DEVNULL)
    # the recipe (README.md, "Python")
    model = torch_ref.Tabular()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in brisk.load(ckpt).items()})
    model.eval()
    with torch.no_grad():
        p = torch.softmax(model.net(torch.from_numpy(x)), dim=1).numpy()
    assert np.abs(p - np.load(tmp_path / "y.npy")).max() < 1e-5
