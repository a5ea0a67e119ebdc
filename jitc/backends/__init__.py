"""Backends: code generators and executors behind `jitc.jit(..., backend=NAME)`."""

from collections.abc import Callable

from jitc.backends.base import Backend, Executable, backend_names, get_backend, register_backend
from jitc.backends.cuda import ARCHS, DEFAULT_ARCH
from jitc.backends.interpreter import InterpreterBackend

register_backend("interpreter", InterpreterBackend)


def _cpu() -> Backend:
    from jitc.backends.cpu.backend import CpuBackend
    return CpuBackend()


register_backend("cpu", _cpu)


def _c() -> Backend:
    from jitc.backends.c.backend import CBackend
    return CBackend()


register_backend("c", _c)


def _cuda(arch: str | None = None) -> Callable[[], Backend]:
    def make() -> Backend:
        from jitc.backends.cuda.backend import CudaBackend
        return CudaBackend() if arch is None else CudaBackend(arch)
    return make


def _cuda_sim() -> Backend:
    from jitc.backends.cuda.backend import CudaSimBackend
    return CudaSimBackend()


# "cuda" targets sm_80 (runs on Ampere and newer); "cuda:sm_90" and the like pick a target.
register_backend("cuda", _cuda())
for _arch in ARCHS:
    if _arch != DEFAULT_ARCH:
        register_backend(f"cuda:{_arch}", _cuda(_arch))
register_backend("cuda-sim", _cuda_sim)

__all__ = ["Backend", "Executable", "backend_names", "get_backend", "register_backend"]
