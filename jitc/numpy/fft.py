"""numpy.fft.fft, ifft, rfft and irfft in traced code.

A power-of-two length is transformed by the self-sorting (Stockham) radix-2 algorithm written
with array operations: the data is held as rows r = 0..2^s-1, row r the transform of the
subsequence x[r::2^s]; each step joins rows r and r + 2^s (its even and odd halves) with one
twiddle multiply, an add, a subtract and a concatenation, from 2^k rows of one element to one
row of 2^k. There is no bit reversal. Other lengths up to `DIRECT_LIMIT` multiply by the DFT
matrix. Twiddles are computed in float64 and rounded once to the result's precision; the error
against numpy is a few units in the last place times log2(n) (docs/dtypes.md has figures).
"""

from __future__ import annotations

import numpy as np

from jitc.numpy._core import implements, lift, normalize_axis, unsupported
from jitc.tracing.tracer import Tracer

# Lengths that are not powers of two are transformed by a dense DFT matrix up to this length.
DIRECT_LIMIT = 1024
_NORMS = (None, "backward", "ortho", "forward")


def _complex_dtype(x: Tracer) -> np.dtype:
    """numpy.fft's result dtype: complex64 for float32/complex64 (and float16), else
    complex128."""
    if x.dtype in (np.float16, np.float32, np.complex64):
        return np.dtype(np.complex64)
    return np.dtype(np.complex128)


def _twiddles(count: int, span: int, sign: int, dtype: np.dtype) -> np.ndarray:
    k = np.arange(count, dtype=np.float64) * (2 * np.pi / span)
    return (np.cos(k) + sign * 1j * np.sin(k)).astype(dtype)


def _stockham(x: Tracer, sign: int) -> Tracer:
    """The transform of a complex x along its last axis, a power of two long.

    While rows outnumber the elements of a row, the array is held transposed (a row of the
    algorithm is a column), so the innermost, contiguous axis is always the longer one: at
    least sqrt(n) elements, which keeps every step's loop vectorizable."""
    n = x.shape[-1]
    batch = x.shape[:-1]
    rows, width = n, 1
    columns = x.reshape(*batch, 1, n)  # [width, rows]
    while rows > width:
        half = rows // 2
        even, odd = columns[..., :half], columns[..., half:]
        if width > 1:
            odd = odd * _twiddles(width, 2 * width, sign, x.dtype)[:, None]
        columns = np.concatenate([even + odd, even - odd], axis=-2)
        rows, width = half, 2 * width
    a = np.swapaxes(columns, -1, -2)  # [rows, width]
    while rows > 1:
        half = rows // 2
        even, odd = a[..., :half, :], a[..., half:, :]
        odd = odd * _twiddles(width, 2 * width, sign, x.dtype)
        a = np.concatenate([even + odd, even - odd], axis=-1)
        rows, width = half, 2 * width
    return a.reshape(*batch, n)


def _direct(x: Tracer, sign: int) -> Tracer:
    n = x.shape[-1]
    k = np.arange(n)
    angles = (np.outer(k, k) % n) * (2 * np.pi / n)
    matrix = (np.cos(angles) + sign * 1j * np.sin(angles)).astype(x.dtype)
    return x @ matrix


def _transform(a: object, n: object, axis: object, norm: object, sign: int, inverse: bool,
               name: str) -> Tracer:
    x = lift(a)
    if x.ndim == 0:
        raise unsupported(f"numpy.fft.{name} of a 0-d array",
                          "numpy raises here too: give it an array of at least one dimension.")
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         '"forward".')
    axis_ = normalize_axis(axis, x.ndim)
    x = np.moveaxis(x.astype(_complex_dtype(x)), axis_, -1)
    x = _resize(x, n, name)
    length = x.shape[-1]
    if length & (length - 1) == 0:
        y = _stockham(x, sign)
    elif length <= DIRECT_LIMIT:
        y = _direct(x, sign)
    else:
        raise unsupported(f"numpy.fft.{name} of length {length}",
                          f"jitc transforms powers of two, and other lengths up to "
                          f"{DIRECT_LIMIT}; pad to a power of two (n=...) if that suits.")
    scale = _scale(norm, length, inverse)
    if scale != 1.0:
        y = y * np.asarray(scale, y.dtype.type(0).real.dtype)
    return np.moveaxis(y, -1, axis_)


def _resize(x: Tracer, n: object, name: str) -> Tracer:
    """numpy's n=: crop or zero-pad the last axis."""
    if n is None:
        if x.shape[-1] == 0:
            raise ValueError("Invalid number of FFT data points (0) specified.")
        return x
    length = int(n)  # type: ignore[call-overload]
    if length < 1:
        raise ValueError(f"Invalid number of FFT data points ({length}) specified.")
    size = x.shape[-1]
    if length <= size:
        return x[..., :length]
    widths = [(0, 0)] * (x.ndim - 1) + [(0, length - size)]
    return np.pad(x, widths)


def _scale(norm: object, n: int, inverse: bool) -> float:
    if norm == "ortho":
        return 1 / np.sqrt(n)
    if (norm == "forward") != inverse:  # backward (default): the inverse divides by n
        return 1 / n
    return 1.0


@implements(np.fft.fft)
def fft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("fft", out)
    return _transform(a, n, axis, norm, -1, False, "fft")


@implements(np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("ifft", out)
    return _transform(a, n, axis, norm, 1, True, "ifft")


@implements(np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("rfft", out)
    x = lift(a)
    if x.dtype.kind == "c":
        raise TypeError("numpy.fft.rfft takes real input; jitc, like numpy, refuses a complex "
                        "array (use numpy.fft.fft)")
    axis_ = normalize_axis(axis, x.ndim)
    length = x.shape[axis_] if n is None else int(n)
    if length < 4 or length & (length - 1):
        full = _transform(x, n, axis, norm, -1, False, "rfft")
        return full[(slice(None),) * axis_ + (slice(0, length // 2 + 1),)]
    signal = _resize(np.moveaxis(x, axis_, -1), length, "rfft")
    spectrum = _real_spectrum(signal, _complex_dtype(x))
    scale = _scale(norm, length, False)
    if scale != 1.0:
        spectrum = spectrum * np.asarray(scale, spectrum.dtype.type(0).real.dtype)
    return np.moveaxis(spectrum, -1, axis_)


def _real_spectrum(x: Tracer, dtype: np.dtype) -> Tracer:
    """The first n/2 + 1 bins of the transform of a real x (last axis, n a power of two) from
    one complex transform of n/2 points: z = x[0::2] + i x[1::2], then
    X[k] = (Z[k] + conj Z[m-k]) / 2 - i w^k (Z[k] - conj Z[m-k]) / 2, with Z[m] = Z[0]."""
    real = np.real(np.zeros((), dtype)).dtype
    pairs = x.astype(real).reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    z = pairs[..., 0] + 1j * pairs[..., 1]
    z = z.astype(dtype)
    spectrum = _stockham(z, -1)
    m = spectrum.shape[-1]
    extended = np.concatenate([spectrum, spectrum[..., :1]], axis=-1)
    mirrored = np.conj(extended[..., ::-1])
    twiddles = _twiddles(m + 1, 2 * m, -1, dtype)
    half_i = np.asarray(-0.5j, dtype)
    return (extended + mirrored) * np.asarray(0.5, real) + \
        twiddles * half_i * (extended - mirrored)


@implements(np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("irfft", out)
    x = lift(a)
    axis_ = normalize_axis(axis, x.ndim)
    x = np.moveaxis(x.astype(_complex_dtype(x)), axis_, -1)
    length = 2 * (x.shape[-1] - 1) if n is None else int(n)
    if length < 1:
        raise ValueError(f"Invalid number of FFT data points ({length}) specified.")
    # The Hermitian spectrum of a real signal of `length` points from its first half: bins
    # past the middle are the conjugates of those before it.
    half = _resize(x, length // 2 + 1, "irfft")
    mirrored = np.conj(half[..., 1:(length + 1) // 2][..., ::-1])
    full = np.concatenate([half, mirrored], axis=-1)
    signal = _transform(full, None, -1, norm, 1, True, "irfft")
    return np.moveaxis(np.real(signal), -1, axis_)


def _no_out(name: str, out: object) -> None:
    if out is not None:
        raise unsupported(f"numpy.fft.{name}(..., out=...)",
                          "Traced arrays are immutable: use the returned value.")


__all__ = ["fft", "ifft", "irfft", "rfft"]
