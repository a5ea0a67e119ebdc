"""Errors raised while tracing, and the user source location they point at."""

from __future__ import annotations

import linecache
import os
import sys

import numpy as np

from jitc.ir.core import Location

_JITC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_SKIPPED = (_JITC_DIR + os.sep, _NUMPY_DIR + os.sep)


class JitcError(Exception):
    """Base class of the errors jitc raises about the user's program."""


class TraceError(JitcError, TypeError):
    """Something in the traced function cannot be compiled (an unsupported call or value)."""


class ShapeError(JitcError, ValueError):
    """Shapes or dtypes of an operation do not fit together."""


class IndexingError(JitcError, IndexError):
    """An index numpy rejects (out of bounds, a mask of the wrong shape, a float index)."""


class ConcretizationError(TraceError):
    """A traced value was needed as a concrete Python value (control flow, int(), ...)."""


class SpecializeArgument(ConcretizationError):
    """A Python int argument was needed as a Python int (a shape, `range(n)`): jitc.jit
    compiles for its value instead (see Jitted._call)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"argument {name!r} is used as a Python int")
        self.name = name


# Whether an absolute source file is the user's: asked for every frame of every traced op.
_IS_USER_FILE: dict[str, bool] = {}


def _is_user_file(raw: str) -> bool:
    known = _IS_USER_FILE.get(raw)
    if known is not None:
        return known
    mine = not os.path.abspath(raw).startswith(_SKIPPED) and not raw.startswith("<frozen")
    if os.path.isabs(raw):  # a relative name depends on the working directory: not kept
        _IS_USER_FILE[raw] = mine
    return mine


def user_location() -> Location | None:
    """The innermost stack frame that belongs to the user's code, not to jitc or numpy."""
    frame = sys._getframe(1)
    known = _IS_USER_FILE  # asked for every traced op: the cached answer without a call
    while frame is not None:
        code = frame.f_code
        mine = known.get(code.co_filename)
        if mine is None:
            mine = _is_user_file(code.co_filename)
        if mine:
            return Location(code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def user_location_in(traceback: object) -> Location | None:
    """The innermost frame of an exception's traceback that belongs to the user's code."""
    found = None
    while traceback is not None:
        code = traceback.tb_frame.f_code  # type: ignore[attr-defined]
        if _is_user_file(code.co_filename):
            found = Location(code.co_filename, traceback.tb_lineno,  # type: ignore[attr-defined]
                             code.co_name)
        traceback = traceback.tb_next  # type: ignore[attr-defined]
    return found


def numpy_function_in(traceback: object) -> str | None:
    """The name of the numpy function the user's code called when an exception came from
    inside numpy (`tri` for `np.tri(n)`), else None."""
    called = None
    after_user = False
    while traceback is not None:
        frame = traceback.tb_frame  # type: ignore[attr-defined]
        user = _is_user_file(frame.f_code.co_filename)
        if after_user:  # the frame the user's line called: numpy's own, or jitc's
            module = frame.f_globals.get("__name__", "")
            called = frame.f_code.co_name if module.startswith("numpy") else None
        elif user:
            called = None
        after_user = user
        traceback = traceback.tb_next  # type: ignore[attr-defined]
    return called


def where(loc: Location | None) -> str:
    """`model.py:42 in attention` plus the source line, for error messages."""
    if loc is None:
        return "(unknown location)"
    text = f"{loc.file}:{loc.line} in {loc.function}"
    source = linecache.getline(loc.file, loc.line).strip()
    return f"{text}\n    {source}\n" if source else text


def located(message: str, loc: Location | None = None) -> str:
    loc = loc or user_location()
    return f"{where(loc).rstrip()}\n{message}" if loc else message
