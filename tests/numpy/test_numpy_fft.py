"""numpy.fft.fft, ifft, rfft and irfft against numpy: power-of-two lengths (the Stockham
steps), other lengths (the DFT matrix), n= cropping and padding, any axis, every norm."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc
from jitc.tracing.errors import TraceError

CASES = [
    ("fft", lambda x: np.fft.fft(x), (16,), np.complex128),
    ("fft_axis0_n", lambda x: np.fft.fft(x, n=8, axis=0), (5, 3), np.complex64),
    ("fft_ortho_float32", lambda x: np.fft.fft(x, norm="ortho"), (2, 32), np.float32),
    ("fft_length6_int", lambda x: np.fft.fft(x, n=6), (4,), np.int32),
    ("ifft_forward", lambda x: np.fft.ifft(x, norm="forward"), (3, 8), np.complex128),
    ("ifft_crop", lambda x: np.fft.ifft(x, n=4, axis=-1), (2, 7), np.complex64),
    ("rfft", lambda x: np.fft.rfft(x), (64,), np.float64),
    ("rfft_axis0", lambda x: np.fft.rfft(x, axis=0), (8, 3), np.float32),
    ("rfft_odd_n", lambda x: np.fft.rfft(x, n=9), (12,), np.float64),
    ("irfft", lambda x: np.fft.irfft(x), (9,), np.complex128),
    ("irfft_n_odd", lambda x: np.fft.irfft(x, n=7, axis=0), (4, 2), np.complex64),
    ("round_trip", lambda x: np.fft.irfft(np.fft.rfft(x), n=x.shape[-1]), (3, 128),
     np.float64),
    ("length1", lambda x: (np.fft.fft(x), np.fft.ifft(x)), (3, 1), np.complex64),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fft_matches_numpy(case, backend):
    _, fn, shape, dtype = case
    x = random(shape, dtype, seed=len(shape))
    got = check_jit(fn, x, backend=backend, rtol=1e-5 if np.dtype(dtype).itemsize <= 8 else
                    1e-12, atol=1e-5 if np.dtype(dtype).itemsize <= 8 else 1e-12)
    want = fn(x)
    assert np.asarray(got if not isinstance(got, tuple) else got[0]).dtype == \
        np.asarray(want if not isinstance(want, tuple) else want[0]).dtype


def test_large_power_of_two_accuracy():
    """2**12 points: the error stays at a few units in the last place times log2(n)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2**12) + 1j * rng.standard_normal(2**12)
    got, want = jitc.jit(np.fft.fft)(x), np.fft.fft(x)
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-14
    x32 = x.astype(np.complex64)
    got32 = jitc.jit(np.fft.fft)(x32)
    assert got32.dtype == np.complex64
    assert np.abs(got32 - np.fft.fft(x32)).max() / np.abs(want).max() < 2e-6


def test_refusals_name_the_call():
    with pytest.raises(TraceError, match=r"numpy\.fft\.fft of length 1031"):
        jitc.jit(np.fft.fft)(np.zeros(1031))
    with pytest.raises(TypeError, match=r"rfft takes real input"):
        jitc.jit(np.fft.rfft)(np.zeros(8, np.complex64))
