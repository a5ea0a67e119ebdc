"""Backends: code generators and executors behind `jitc.jit(..., backend=NAME)`."""

from jitc.backends.base import Backend, Executable, backend_names, get_backend, register_backend
from jitc.backends.interpreter import InterpreterBackend

register_backend("interpreter", InterpreterBackend)


def _cpu() -> Backend:
    from jitc.backends.cpu.backend import CpuBackend
    return CpuBackend()


register_backend("cpu", _cpu)

__all__ = ["Backend", "Executable", "backend_names", "get_backend", "register_backend"]
