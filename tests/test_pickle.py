"""A jitted function pickles by reference (its Python function, static and donated arguments
and options), before and after it has compiled; the receiving process compiles anew, or loads
the machine code from the persistent compile cache."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from picklable import decorated, normalize

import jitc

TESTS = Path(__file__).resolve().parent
X = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
Y = np.float32(0.5) * np.ones((3, 4), np.float32)


def _with_options() -> jitc.api.Jitted:
    return jitc.jit(normalize, backend="interpreter", static_argnames="axis",
                    disabled_passes=["cse"])


@pytest.mark.parametrize("called_first", [False, True])
def test_a_jitted_function_round_trips_in_process(called_first: bool) -> None:
    fast = _with_options()
    if called_first:
        np.testing.assert_allclose(fast(X, axis=1), normalize(X, 1), rtol=1e-6)
    copy = pickle.loads(pickle.dumps(fast))
    assert copy is not fast and copy.fun is normalize and copy.cache_size == 0
    assert copy.options == fast.options and copy.signature.static_names == {"axis"}
    np.testing.assert_allclose(copy(X, axis=0), normalize(X, 0), rtol=1e-6)


def test_a_decorated_function_pickles_as_its_module_attribute() -> None:
    np.testing.assert_allclose(decorated(X, Y), np.tanh(X) * Y + 1.0, rtol=1e-6)
    assert pickle.loads(pickle.dumps(decorated)) is decorated


def test_a_local_function_cannot_be_pickled_by_reference() -> None:
    def local(x):
        return x + 1

    with pytest.raises((pickle.PicklingError, AttributeError), match=r"<locals>\.local'"):
        pickle.dumps(jitc.jit(local))


RECEIVER = """
import pickle, sys
import numpy as np
decorated_, options_, default_ = pickle.loads(sys.stdin.buffer.read())
x = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
np.testing.assert_allclose(decorated_(x, x), np.tanh(x) * x + 1.0, rtol=1e-6)
np.testing.assert_allclose(options_(x, axis=1), x / np.abs(x).sum(axis=1, keepdims=True),
                           rtol=1e-6)
np.testing.assert_allclose(default_(x, 0), x / np.abs(x).sum(axis=0, keepdims=True), rtol=1e-6)
print(options_.options.backend, default_.options.backend, default_.options.num_threads,
      sorted(default_.signature.static_names), decorated_.cache_size, options_.cache_size)
"""


def test_jitted_functions_compiled_here_work_in_another_process() -> None:
    with_options, default = _with_options(), jitc.jit(normalize, static_argnums=1)
    decorated(X, Y)  # each one compiled before it is pickled
    with_options(X, axis=1)
    default(X, 1)
    assert default.cache_size == with_options.cache_size == 1
    # The receiver's own defaults apply where the options were not set: another thread count
    # and default backend, while the explicitly chosen interpreter backend travels.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
           "JITC_NUM_THREADS": "1", "JITC_BACKEND": "c"}
    run = subprocess.run([sys.executable, "-c", RECEIVER], cwd=TESTS.parent, env=env,
                         input=pickle.dumps((decorated, with_options, default)),
                         capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout.decode().split() == ["interpreter", "c", "1", "['axis']", "1", "1"]


CACHED_RECEIVER = """
import pickle, sys
import numpy as np
decorated_ = pickle.loads(sys.stdin.buffer.read())
x = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
np.testing.assert_allclose(decorated_(x, x), np.tanh(x) * x + 1.0, rtol=1e-6)
print([s["cached"] for s in decorated_.compile_stats()])
"""


def test_an_unpickled_function_loads_its_code_from_the_persistent_cache(tmp_path,
                                                                        monkeypatch) -> None:
    """The receiving process traces the function, and finds the machine code this process
    compiled in the shared cache instead of compiling it again."""
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    fast = jitc.jit(decorated.fun)  # the same function, compiled here for the CPU
    np.testing.assert_allclose(fast(X, X), np.tanh(X) * X + 1.0, rtol=1e-6)
    assert [s["cached"] for s in fast.compile_stats()] == [False]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
           "JITC_BACKEND": "cpu"}
    run = subprocess.run([sys.executable, "-c", CACHED_RECEIVER], cwd=TESTS.parent, env=env,
                         input=pickle.dumps(decorated), capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout.decode().split() == ["[True]"]


def test_a_process_makes_one_jitted_function_of_each_it_receives() -> None:
    """A Dask worker receives a jitted function with every task; it compiles once per
    signature only if every copy of one sender's function is the same object. A second
    function of the sender, even one made alike, stays a function apart."""
    fast, alike = _with_options(), _with_options()
    data = pickle.dumps(fast)
    first, again = pickle.loads(data), pickle.loads(pickle.dumps(fast))
    assert first is again and first is not fast
    np.testing.assert_allclose(first(X, axis=1), normalize(X, 1), rtol=1e-6)
    assert pickle.loads(data).cache_size == 1
    other = pickle.loads(pickle.dumps(alike))
    assert other is not first and other.cache_size == 0
    assert pickle.loads(pickle.dumps(first)) is first  # passed on: still the same function


def test_options_left_to_their_defaults_stay_the_receivers_own(monkeypatch) -> None:
    """Only the options given to `jit` travel: a default that changed in the sender since
    (starting a Dask LocalCluster sets OMP_NUM_THREADS=1 in the client process) is not sent
    as if it had been chosen."""
    monkeypatch.setenv("JITC_NUM_THREADS", "3")
    chosen, default = jitc.jit(normalize, num_threads=2), jitc.jit(normalize)
    assert default.options.num_threads == 3
    monkeypatch.setenv("JITC_NUM_THREADS", "1")
    assert pickle.loads(pickle.dumps(default)).options.num_threads == 1
    assert pickle.loads(pickle.dumps(chosen)).options.num_threads == 2
