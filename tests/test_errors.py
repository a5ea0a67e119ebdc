"""Errors name the user's function, file, line and source text, the shapes and dtypes involved,
and what to do instead."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import jitc

X = np.ones((3, 4), np.float32)
Y = np.ones((5,), np.float32)
W = np.ones((5, 2), np.float32)
TABLE = np.eye(10, dtype=np.float32)

# Each function below fails on the line marked `# error`.


def branch_on_value(x):
    if x.sum() > 0:  # error
        return x
    return -x


def python_float(x):
    scale = float(x.max())  # error
    return x * scale


def add_bias(x, bias):
    return x + bias  # error


def project(x, w):
    return x @ w  # error


def positions(x):
    return np.nonzero(x)  # error


def invert(x):
    return np.linalg.tensorinv(x[:, :3], ind=1)  # error


def spectrum(x):
    return np.fft.fft2(x)  # error


def keep_positive(x):
    return x[x > 0]  # error


def row_five(x):
    return x[5]  # error


def gather_rows(x):
    return x[np.array([0, 7])]  # error


def three_heads(x):
    q, k, v = np.split(x, 3, axis=-1)  # error
    return q + k + v


def to_long_double(x):
    return x.astype(np.longdouble)  # error


def to_string(x):
    return x.astype("U8")  # error


def kept_rows(x):
    return x.compress([True, False, True], axis=0)  # error


CASES = [
    # (function, arguments, exception, fragments of the message after the source line)
    (branch_on_value, (X,), jitc.ConcretizationError,
     ["the truth value of a traced array (bool[]) in branch_on_value()", "np.where",
      "static_argnums"]),
    (python_float, (X,), jitc.ConcretizationError,
     ["float() of a traced array (f32[])", "static_argnums"]),
    (add_bias, (X, Y), jitc.ShapeError,
     ["add: cannot broadcast f32[3,4] with f32[5]", "add axes (x[:, None])"]),
    (project, (X, W), jitc.ShapeError,
     ["matmul: f32[3,4] @ f32[5,2]", "last dimension of the left operand", ".T"]),
    (positions, (X,), jitc.TraceError,
     ["numpy.nonzero is not supported inside jitc.jit yet", "known only when the compiled "
      "code runs", "np.where(mask, x, fill)"]),
    (invert, (X,), jitc.TraceError,
     ["numpy.linalg.tensorinv is not supported inside jitc.jit yet"]),
    (spectrum, (X,), jitc.TraceError, ["numpy.fft.fft2 is not supported inside jitc.jit yet",
                                       "one-dimensional fft, ifft, rfft and irfft"]),
    (keep_positive, (X,), jitc.TraceError,
     ["indexing with a traced boolean mask", "not supported", "np.where(mask, x, fill)"]),
    (row_five, (X,), jitc.IndexingError,
     ["index 5 is out of bounds for axis 0 with size 3 (indexing f32[3,4])"]),
    (gather_rows, (X,), jitc.IndexingError,
     ["index 7 is out of bounds for axis 0 with size 3 (indexing f32[3,4])"]),
    (three_heads, (X,), jitc.ShapeError,
     ["numpy.split: axis 1 of f32[3,4] (size 4) does not divide into 3 equal sections",
      "np.array_split"]),
    (to_long_double, (X,), jitc.TraceError,
     [f"dtype {np.dtype(np.longdouble)} is not supported by jitc", "supported: bool, int8"]),
    (to_string, (X,), jitc.TraceError, ["dtype <U8 is not supported by jitc"]),
    (kept_rows, (X,), AttributeError,
     ["ndarray.compress is not supported on traced arrays inside jitc.jit yet"]),
]


def _error_line(fn) -> tuple[int, str]:
    lines, first = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if "# error" in text:
            return first + offset, text.strip()
    raise AssertionError(f"{fn.__name__} has no `# error` line")


@pytest.mark.parametrize("fn,args,kind,fragments", CASES, ids=[c[0].__name__ for c in CASES])
def test_error_message(fn, args, kind, fragments):
    with pytest.raises(kind) as info:
        jitc.jit(fn)(*args)
    message = str(info.value)
    line, source = _error_line(fn)
    header = f"{__file__}:{line} in {fn.__name__}\n    {source}\n"
    assert message.startswith(header), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    assert os.path.basename(__file__) in message


def test_errors_are_numpy_compatible_exception_types():
    # Code that catches numpy's exceptions keeps working: shape errors are ValueErrors,
    # trace errors (unsupported calls and values) are TypeErrors.
    assert issubclass(jitc.ShapeError, ValueError) and issubclass(jitc.TraceError, TypeError)
    assert issubclass(jitc.ConcretizationError, jitc.TraceError)
    with pytest.raises(ValueError):
        jitc.jit(add_bias)(X, Y)


def test_python_int_out_of_range_for_the_dtype():
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        jitc.jit(lambda x: x + 300)(X.astype(np.int8))


def test_unknown_backend():
    with pytest.raises(ValueError, match=r"unknown backend 'tpu'; available backends: .*"
                                         r"interpreter"):
        jitc.jit(add_bias, backend="tpu")


def test_unsupported_argument_types():
    with pytest.raises(TypeError, match=r"add_bias: argument bias: jitc\.jit arguments must "
                                        r"be numpy arrays.*got str.*static_argnums"):
        jitc.jit(add_bias)(X, "bias")
    with pytest.raises(TypeError, match=f"add_bias: argument bias: dtype "
                                        f"{np.dtype(np.longdouble)} is not supported by jitc"):
        jitc.jit(add_bias)(X, Y.astype(np.longdouble))


def test_errors_inside_nested_helpers_point_at_the_helper_line():
    def helper(a):
        return a.reshape(7, -1)  # error

    def model(x):
        return helper(x) * 2
    line, source = _error_line(helper)
    with pytest.raises(jitc.ShapeError) as info:
        jitc.jit(model)(X)
    message = str(info.value)
    assert message.startswith(f"{__file__}:{line} in helper\n    {source}\n")
    assert "cannot reshape f32[3,4] into shape (7, -1)" in message


def test_located_source_lines_are_also_in_the_ir():
    text = jitc.jit(add_bias).lower(X, X[0]).as_text()
    line, _ = _error_line(add_bias)
    assert f"# test_errors.py:{line} (add_bias)" in text
