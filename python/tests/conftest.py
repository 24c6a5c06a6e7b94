"""The tests run on the library a CMake build made (BRISK_LIBRARY, set by ctest) and on the
package source in python/ (PYTHONPATH); BRISK_BIN is that build's command, for data."""
import os
import subprocess

import pytest


@pytest.fixture
def brisk_bin():
    return os.environ.get("BRISK_BIN", "brisk")


@pytest.fixture
def tabular(tmp_path, brisk_bin):
    """A small classification data set (64 features, 3 classes) in tmp_path/tab.npz."""
    subprocess.run([brisk_bin, "synth", "tabular", str(tmp_path / "tab.npz"), "--samples", "1024"], check=True,
                   stdout=subprocess.DEVNULL)
    return tmp_path / "tab.npz"
