"""brisk.train: a dict or a path, the summary and checkpoint, progress, errors."""
import json
import sys

import pytest

import brisk


def config(data, out):
    out = str(out)
    return {"model": {"type": "mlp", "inputs": 64, "hidden": [32], "outputs": 3},
            "data": {"train": str(data)}, "train": {"batch_size": 128, "epochs": 2, "out_dir": out,
                                                    "log_every": 1}}


def test_train_dict_returns_summary_and_checkpoint(tabular, tmp_path, capsys):
    summary, ckpt = brisk.train(config(tabular, tmp_path / "run"))
    assert ckpt == str(tmp_path / "run" / "last.safetensors")
    assert summary["steps"] == 2 * (1024 * 9 // 10 // 128) and summary["epochs"] == 2
    assert summary["best_val_loss"] > 0 and 0 <= summary["best_val_accuracy"] <= 1
    assert summary["params"] == 64 * 32 + 32 + 99 and summary["stopped_by_signal"] == 0
    # one serialiser: the summary carries what metrics.jsonl's run_end line says
    with open(tmp_path / "run" / "metrics.jsonl") as f:
        end = [r for r in map(json.loads, f) if r.get("event") == "run_end"][-1]
    assert {k: v for k, v in summary.items() if k != "out_dir"} == {k: v for k, v in end.items() if k not in ("event", "optimizations")}
    err = capsys.readouterr().err  # the progress bar (tqdm or the plain one) went to stderr
    assert "%d/%d" % (summary["steps"], summary["steps"]) in err


def test_train_path_overrides_and_no_progress(tabular, tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config("tab.npz", tmp_path / "run2")))  # data relative to the config
    summary, ckpt = brisk.train(path, overrides={"train.epochs": 1}, progress=False)
    assert summary["epochs"] == 1 and ckpt.endswith("run2/last.safetensors")
    assert capsys.readouterr().err == ""
    # a second run in the same directory is refused with brisk's message, then replaced
    with pytest.raises(brisk.BriskError, match="holds a previous run"):
        brisk.train(path, progress=False)
    s2, _ = brisk.train(path, overrides=["train.epochs=1"], overwrite=True, progress=False)
    assert s2["steps"] == summary["steps"]
    s3, _ = brisk.train(path, overrides=["train.epochs=2"], resume="auto", progress=False)
    assert s3["steps"] == 2 * summary["steps"] and s3["steps_run"] == summary["steps"]


def test_train_errors_carry_brisk_messages(tabular, tmp_path):
    bad = config(tabular, tmp_path / "r")
    bad["train"]["batch_size"] = -3
    with pytest.raises(brisk.BriskError, match="train.batch_size") as e:
        brisk.train(bad)
    assert e.value.status == "invalid"
    with pytest.raises(brisk.BriskError, match="nope.json"):
        brisk.train(str(tmp_path / "nope.json"))
    with pytest.raises(TypeError, match="dict"):
        brisk.train(42)
    with pytest.raises(TypeError, match="overrides"):
        brisk.train(bad, overrides=5)
    with pytest.raises(TypeError, match="overrides"):
        brisk.train(bad, overrides="train.epochs=1")


def test_log_callable_gets_messages(tabular, tmp_path):
    seen = []
    brisk.train(config(tabular, tmp_path / "run"), progress=False, log=lambda lv, m: seen.append((lv, m)))
    assert any(lv == "info" and "step" in m for lv, m in seen)


def test_ctrl_c_stops_with_checkpoint(tabular, tmp_path, monkeypatch):
    """A KeyboardInterrupt in the progress callback stops the run after its step, with a
    checkpoint, and is raised again once the run has returned (a notebook's Ctrl-C)."""
    bt = sys.modules["brisk.train"]  # the module (brisk.train is the function)

    class Interrupting(bt._PlainBar):
        def update(self, k):
            raise KeyboardInterrupt

    monkeypatch.setattr(bt, "_bar", lambda total, desc: Interrupting(total, desc))
    cfg = config(tabular, tmp_path / "run")
    cfg["train"]["epochs"] = 50
    with pytest.raises(KeyboardInterrupt):
        brisk.train(cfg)
    assert (tmp_path / "run" / "last.safetensors").exists()
    with open(tmp_path / "run" / "metrics.jsonl") as f:
        end = [r for r in map(json.loads, f) if r.get("event") == "run_end"][-1]
    assert end["stopped_by_signal"] and end["steps"] < 50 * 7