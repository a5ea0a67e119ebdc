"""The persistent compile cache (jitc/diskcache.py, jitc/compile_cache.py): hits across
processes, damaged and foreign entries rebuilt, concurrent writers, eviction at the size bound,
turning it off, and `jitc cache info/clear`. Every test uses a folder of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import jitc
from jitc import diskcache
from jitc.cli import main

ROOT = Path(__file__).resolve().parent.parent

# A module of its own, so that every process traces the same program (the same source
# locations): a matrix product (GEMM routines), an array constant, two results, a donated
# argument.
MODEL = '''
import numpy as np
import jitc

def attention_like(x, w, out):
    scores = x @ w
    masked = np.where(np.tri(x.shape[0], w.shape[1], dtype=bool), scores, -1.0)
    out[...] = np.tanh(masked)
    return masked.sum(axis=1), out * 2.0

step = jitc.jit(attention_like, donate_argnums=2)
'''

CALLER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from cached_model import attention_like, step
rng = np.random.default_rng(0)
x = rng.standard_normal((16, 24)).astype(np.float32)
w = rng.standard_normal((24, 20)).astype(np.float32)
out = np.zeros((16, 20), np.float32)
got = step(x, w, out.copy())
want = attention_like(x, w, out.copy())
for g, e in zip(got, want):
    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
print(json.dumps([s["cached"] for s in step.compile_stats()]))
'''


def _write_model(folder: Path) -> None:
    (folder / "cached_model.py").write_text(MODEL)


def _run(code: str, folder: Path, cache: Path | str, *args: str
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JITC_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, str(folder), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _entries(cache: Path, namespace: str = "cpu") -> list[Path]:
    return sorted((cache / namespace).glob("*.jce"))


def test_a_later_process_loads_the_compiled_function(tmp_path) -> None:
    _write_model(tmp_path)
    cache = tmp_path / "cache"
    first = _run(CALLER, tmp_path, cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["[false]"]
    assert len(_entries(cache)) == 1
    second = _run(CALLER, tmp_path, cache)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["[true]"]  # the same results, from the stored code


SWEEP = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from cached_model import attention_like, step
rng = np.random.default_rng(0)
w = rng.standard_normal((24, 20)).astype(np.float32)
for rows in (16, 17, 30, 21):
    x = rng.standard_normal((rows, 24)).astype(np.float32)
    out = np.zeros((rows, 20), np.float32)
    got = step(x, w, out.copy())
    want = attention_like(x, w, out.copy())
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
print(json.dumps([[s["symbolic"], s["cached"]] for s in step.compile_stats()]))
'''


def test_a_later_process_loads_a_symbolic_compilation_too(tmp_path) -> None:
    # A sweep over sizes compiles the first exactly and the rest once, symbolically; a later
    # process loads both from the cache (a server restarting skips both compilations).
    _write_model(tmp_path)
    cache = tmp_path / "cache"
    first = _run(SWEEP, tmp_path, cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split("\n")[0] == "[[false, false], [true, false]]"
    assert len(_entries(cache)) == 2
    second = _run(SWEEP, tmp_path, cache)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split("\n")[0] == "[[false, true], [true, true]]"


def test_two_processes_compiling_at_once_both_succeed_and_leave_one_good_entry(
        tmp_path) -> None:
    _write_model(tmp_path)
    cache = tmp_path / "cache"
    env = {**os.environ, "JITC_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.Popen([sys.executable, "-c", CALLER, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    assert len(_entries(cache)) == 1
    assert not list((cache / "cpu").glob("*.tmp"))
    again = _run(CALLER, tmp_path, cache)
    assert again.returncode == 0 and again.stdout.split() == ["[true]"], again.stderr


WRITER = '''
import sys
from jitc import diskcache
me, rounds = int(sys.argv[2]), int(sys.argv[3])
for n in range(rounds):
    # Both processes write the one key, with payloads of different sizes, and read it back.
    blob = bytes([me]) * (1000 + 7919 * ((n + me) % 13))
    diskcache.put("cpu", "the key", {"writer": me}, [blob, blob[:100]])
    entry = diskcache.get("cpu", "the key")
    if entry is not None:
        writer = entry.meta["writer"]
        size = len(entry.blobs[0])
        assert entry.blobs[0] == bytes([writer]) * size and entry.blobs[1] == entry.blobs[0][:100]
print("ok")
'''


def test_concurrent_writers_of_one_key_never_expose_a_partial_entry(tmp_path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "JITC_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(me), "300"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for me in (1, 2)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0 and out.strip() == "ok", err


def _square(x):
    return x * x + 1.0


def _cached_flags(jitted: jitc.api.Jitted) -> list[bool]:
    return [s["cached"] for s in jitted.compile_stats()]


@pytest.mark.parametrize("damage", ["flipped", "truncated", "foreign", "garbage"])
def test_a_damaged_or_foreign_entry_is_rebuilt_not_loaded(tmp_path, monkeypatch,
                                                          damage: str) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    jitc.jit(_square)(x)
    [mine] = _entries(tmp_path)
    jitc.jit(_square)(x.astype(np.float64))  # another entry, to pass off as this one
    [other] = [p for p in _entries(tmp_path) if p != mine]
    good = mine.read_bytes()
    if damage == "flipped":
        middle = len(good) // 2 + 10
        mine.write_bytes(good[:middle] + bytes([good[middle] ^ 0x40]) + good[middle + 1:])
    elif damage == "truncated":
        mine.write_bytes(good[:-50])
    elif damage == "foreign":
        mine.write_bytes(other.read_bytes())  # a valid entry, of another key
    else:
        mine.write_bytes(b"\x7fELF" + b"\0" * 200)
    fresh = jitc.jit(_square)
    np.testing.assert_array_equal(fresh(x), _square(x))
    assert _cached_flags(fresh) == [False]  # compiled again, and written again
    again = jitc.jit(_square)
    np.testing.assert_array_equal(again(x), _square(x))
    assert _cached_flags(again) == [True]


def test_the_entry_key_covers_the_code_options(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    jitc.jit(_square)(x)
    other_threads = jitc.jit(_square, num_threads=3)
    other_passes = jitc.jit(_square, disabled_passes=["cse"])
    for jitted in (other_threads, other_passes):
        np.testing.assert_array_equal(jitted(x), _square(x))
        assert _cached_flags(jitted) == [False]
    assert len(_entries(tmp_path)) == 3
    loaded = jitc.jit(_square).lower(x).compile()
    assert loaded.stats.cached and loaded.stats.passes == ()
    # What the stored machine code cannot tell is made again when asked for.
    assert "define" in loaded.as_text() and loaded.cost_analysis()["kernels"] == 1


@pytest.mark.parametrize("setting", ["", "off", "option"])
def test_the_cache_turned_off_writes_nothing(tmp_path, monkeypatch, setting: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if setting == "option":
        monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path / "cache"))
        jitted = jitc.jit(_square, disk_cache=False)
    else:
        monkeypatch.setenv("JITC_CACHE_DIR", setting)
        jitted = jitc.jit(_square)
    x = np.arange(5, dtype=np.float32)
    for _ in range(2):  # compiled anew after clear_cache: not from a disk cache
        np.testing.assert_array_equal(jitted(x), _square(x))
        assert _cached_flags(jitted) == [False]
        jitted.clear_cache()
    assert not any(p.is_file() for p in tmp_path.rglob("*")), list(tmp_path.rglob("*"))


def test_the_default_location_follows_xdg(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("JITC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert diskcache.root() == tmp_path / "jitc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert diskcache.root() == tmp_path / "home" / ".cache" / "jitc"


def test_eviction_keeps_the_most_recently_used_entries_under_the_bound(tmp_path,
                                                                       monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JITC_CACHE_MAX_MB", str(100_000 / (1 << 20)))  # 100 kB
    blob = b"x" * 20_000
    for n in range(4):
        diskcache.put("cpu", f"key {n}", {}, [blob])
        path = tmp_path / "cpu" / f"{diskcache.digest(f'key {n}')}.jce"
        os.utime(path, (1000 + n, 1000 + n))  # written in this order, a second apart
    assert diskcache.info()["entries"] == 4  # 80 kB: under the bound
    assert diskcache.get("cpu", "key 0") is not None  # used now: the most recent
    diskcache.put("cpu", "key 4", {}, [blob])  # over the bound: down to 90 kB or less
    info = diskcache.info()
    assert info["bytes"] <= 90_000 and info["entries"] == 4
    kept = [n for n in range(5) if diskcache.get("cpu", f"key {n}") is not None]
    assert kept == [0, 2, 3, 4]  # the least recently used went, not the first written


def test_stale_temporary_files_are_removed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    (tmp_path / "cpu").mkdir()
    stale, fresh = tmp_path / "cpu" / ".abc.1.tmp", tmp_path / "cpu" / ".abc.2.tmp"
    for path in (stale, fresh):
        path.write_bytes(b"partial")
    os.utime(stale, (time.time() - 2 * diskcache.STALE_SECONDS,) * 2)
    diskcache.info()
    assert not stale.exists() and fresh.exists()  # a write in progress stays


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JITC_CACHE_MAX_MB", "64")
    jitc.jit(_square)(np.ones(3, np.float32))
    diskcache.put("c", "a library", {}, [b"\0" * 3000])
    (tmp_path / "notes.txt").write_text("not ours")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"location: {tmp_path}" in out and "entries:  2" in out
    assert "limit:    64.0 MiB" in out and "c              1 entries" in out
    assert main(["cache", "clear"]) == 0
    assert "deleted 2 entries" in capsys.readouterr().out
    assert diskcache.info()["entries"] == 0 and (tmp_path / "notes.txt").exists()
    monkeypatch.setenv("JITC_CACHE_DIR", "off")
    assert main(["cache", "info"]) == 0
    assert "the compile cache is off" in capsys.readouterr().out


def test_another_jitc_does_not_load_the_entry(tmp_path, monkeypatch) -> None:
    """The key holds jitc's version and a hash of its source: an upgraded or edited jitc
    compiles anew."""
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    x = np.ones(4, np.float32)
    jitc.jit(_square)(x)
    assert diskcache.code_identity().startswith(f"jitc {jitc.__version__} ")
    monkeypatch.setattr(diskcache, "code_identity", lambda: "jitc 99.0 0123")
    jitted = jitc.jit(_square)
    np.testing.assert_array_equal(jitted(x), _square(x))
    assert _cached_flags(jitted) == [False] and len(_entries(tmp_path)) == 2
