"""A stand-in for pycuda.driver whose "device memory" is host memory and whose kernel
launches run the kernels' simulator builds: the real runtime path (runtime.py, host.py)
without a GPU. It records launches, uploads and readbacks, so tests pin what the runtime
does on the device."""

from __future__ import annotations

import ctypes
import types
from typing import Any

import numpy as np

import jitc
from jitc.backends.cuda.ptx import entry_names
from jitc.backends.cuda.simulator import SimulatedKernels
from jitc.backends.cuda.wrappers import scratch_bytes


class FakeAllocation:
    def __init__(self, nbytes: int) -> None:
        self.memory = np.zeros(nbytes + 64, np.uint8)
        self.address = (self.memory.ctypes.data + 63) // 64 * 64

    def __int__(self) -> int:
        return self.address


class FakeDriver(types.ModuleType):
    """The part of pycuda.driver the runtime uses."""

    def __init__(self) -> None:
        super().__init__("pycuda.driver")
        self.programs: dict[str, SimulatedKernels] = {}  # PTX -> its kernels' host build
        self.launches: list[tuple[str, tuple[int, int], tuple[int, int, int], int]] = []
        self.uploads = 0
        self.readbacks: list[int] = []  # the bytes of each device-to-host copy
        self.device_copies = 0
        self.allocations: list[FakeAllocation] = []
        driver = self

        class Device:
            @staticmethod
            def count() -> int:
                return 1

            def __init__(self, ordinal: int) -> None:
                assert ordinal == 0

            def retain_primary_context(self) -> Any:
                return types.SimpleNamespace(push=lambda: None, pop=lambda: None)

        class Function:
            def __init__(self, kernels: SimulatedKernels, name: str) -> None:
                self.kernels, self.name = kernels, name

            def prepare(self, signature: str) -> None:
                self.signature = signature

            def prepared_call(self, grid: tuple[int, int], block: tuple[int, int, int],
                              *pointers: np.uintp) -> None:
                assert len(pointers) == len(self.signature)
                driver.launches.append((self.name, grid, block, len(pointers)))
                spec = next(s for s in self.kernels.specs if s.name == self.name)
                scratch = np.zeros(max(scratch_bytes(spec), 1), np.uint8)
                self.kernels.launch(self.name, [int(p) for p in pointers], scratch.ctypes.data,
                                    grid[0])

        class Module:
            def __init__(self, ptx: str) -> None:
                self.kernels = driver.programs[ptx]
                self.entries = set(entry_names(ptx))

            def get_function(self, name: str) -> Function:
                assert name in self.entries
                return Function(self.kernels, name)

        self.Device = Device
        self.Context = types.SimpleNamespace(synchronize=lambda: None)
        self.module_from_buffer = lambda data: Module(data.decode())

    def init(self) -> None:
        pass

    def mem_alloc(self, nbytes: int) -> FakeAllocation:
        allocation = FakeAllocation(nbytes)
        self.allocations.append(allocation)
        return allocation

    def memcpy_htod(self, target: Any, host: np.ndarray) -> None:
        self.uploads += 1
        ctypes.memmove(int(target), host.ctypes.data, host.nbytes)

    def memcpy_dtoh(self, host: np.ndarray, source: Any) -> None:
        self.readbacks.append(host.nbytes)
        ctypes.memmove(host.ctypes.data, int(source), host.nbytes)

    def memcpy_dtod(self, target: Any, source: Any, nbytes: int) -> None:
        self.device_copies += 1
        ctypes.memmove(int(target), int(source), nbytes)


def compile_on_fake(driver: FakeDriver, fn: Any, *args: Any) -> jitc.Compiled:
    compiled = jitc.jit(fn, backend="cuda").lower(*args).compile()
    driver.programs[compiled.as_text()] = SimulatedKernels(compiled.executable.lowering)
    return compiled
