"""`pip install ./python` builds libbrisk.so through CMake (scikit-build-core) and the installed
package trains. Offline-tolerant: skipped when scikit-build-core cannot be imported (from
build/pydeps, tools/install-python-deps.sh). CUDA off and ccache, to keep it to seconds."""
import os
import shutil
import subprocess
import sys

import pytest


def test_pip_install(tmp_path):
    pytest.importorskip("scikit_build_core")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env = dict(os.environ)
    env.pop("BRISK_LIBRARY", None)
    args = "-DBRISK_CUDA=OFF -DBRISK_NATIVE=OFF"
    if shutil.which("ccache"):
        args += " -DCMAKE_C_COMPILER_LAUNCHER=ccache"
    env["CMAKE_ARGS"] = args
    env["SKBUILD_BUILD_DIR"] = str(tmp_path / "build")
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-build-isolation", "--no-deps", "--break-system-packages", "--target", str(target), src],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "brisk" / "libbrisk.so").exists()
    env["PYTHONPATH"] = os.pathsep.join([str(target)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p and "python" not in os.path.basename(p.rstrip("/"))])
    code = ("import brisk, numpy as np; s = brisk.Session({'model': {'type': 'mlp', 'inputs': 2, 'hidden': [4], "
            "'outputs': 1, 'task': 'regress'}, 'train': {'batch_size': 4}}); "
            "s.push(np.ones((8, 2)), np.ones(8)); s.train_epochs(1); print(brisk.__file__, s.predict([[1, 2]]).shape)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert str(target) in r.stdout and "(1, 1)" in r.stdout
