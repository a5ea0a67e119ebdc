"""Running kernels on an NVIDIA GPU through pycuda.

pycuda is imported only here, and only when something runs on the GPU: compiling needs
neither pycuda nor a driver. The runtime takes the primary context of device 0, loads each
executable's PTX once (the driver assembles it for the device at hand), keeps array
constants on the device, and launches the kernels in program order on the default stream,
with the launch configurations the code generator computed; control flow runs from the host
between launches (host.py).
"""

from __future__ import annotations

import atexit
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from jitc.backends.cuda.codegen import Lowering
from jitc.backends.cuda.device import DeviceArray
from jitc.backends.cuda.host import HostProgram
from jitc.backends.cuda.kernel import KernelSpec
from jitc.backends.cuda.ptx import entry_names
from jitc.backends.cuda.symbolic_call import SymbolicCall
from jitc.ir.core import Module

_INSTALL = ("pip install 'jitc[cuda]' (pycuda builds against the CUDA toolkit and needs an "
            "NVIDIA driver); without a GPU, f.lower(...).compile().as_text() still gives the "
            "PTX, and backend='cuda-sim' runs the same kernels on the CPU")


class CudaUnavailable(RuntimeError):
    """pycuda, the NVIDIA driver or a GPU is missing."""


class Runtime:
    def __init__(self) -> None:
        try:
            import pycuda.driver as driver
        except ImportError as exc:
            raise CudaUnavailable(f"the cuda backend runs kernels through pycuda, which "
                                  f"cannot be imported ({exc}); {_INSTALL}") from None
        try:
            driver.init()
            count = driver.Device.count()
        except Exception as exc:  # pycuda raises its own error types for a missing driver
            raise CudaUnavailable(f"the CUDA driver could not be initialised ({exc}); "
                                  f"{_INSTALL}") from None
        if count == 0:
            raise CudaUnavailable(f"no CUDA device is present; {_INSTALL}")
        self.driver = driver
        self.device = driver.Device(0)
        self.context = self.device.retain_primary_context()
        self.context.push()
        atexit.register(self.context.pop)

    def allocate(self, nbytes: int) -> Any:
        return self.driver.mem_alloc(max(nbytes, 1))

    def put(self, array: np.ndarray) -> DeviceArray:
        host = np.asarray(array, order="C")
        allocation = self.allocate(host.nbytes)
        if host.nbytes:
            self.driver.memcpy_htod(allocation, host)
        return DeviceArray(allocation, host.shape, host.dtype, self)

    def empty(self, shape: Sequence[int], dtype: np.dtype) -> DeviceArray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return DeviceArray(self.allocate(nbytes), tuple(shape), np.dtype(dtype), self)

    def to_host(self, array: DeviceArray) -> np.ndarray:
        host = np.empty(array.shape, array.dtype)
        if host.nbytes:
            self.driver.memcpy_dtoh(host, array.allocation)
        return host


@functools.cache
def get_runtime() -> Runtime:
    return Runtime()


def runtime_unavailable_reason() -> str | None:
    try:
        get_runtime()
    except CudaUnavailable as exc:
        return str(exc)
    return None


class _GpuDevice:
    """The host program's device (host.py): launches, copies and readbacks through pycuda on
    the default stream, so they run in the order they are issued."""

    def __init__(self, driver: Any, functions: dict[str, Any]) -> None:
        self.driver = driver
        self.functions = functions

    def launch(self, spec: KernelSpec, pointers: Sequence[int], blocks: int) -> None:
        self.functions[spec.name].prepared_call(
            (blocks, 1), (spec.launch.block, 1, 1), *(np.uintp(p) for p in pointers))

    def copy(self, target: int, source: int, nbytes: int) -> None:
        self.driver.memcpy_dtod(target, source, nbytes)

    def read(self, source: int, nbytes: int) -> bytes:
        host = np.empty(nbytes, np.uint8)
        self.driver.memcpy_dtoh(host, source)  # synchronous: waits for the kernels before it
        return host.tobytes()


class LoadedProgram:
    """One executable's PTX loaded on the device, with its constants uploaded."""

    def __init__(self, module: Module, lowering: Lowering, ptx: str) -> None:
        self.runtime = get_runtime()
        self.lowering = lowering
        self.plan = lowering.plan
        fn = module.entry
        self.arg_types = [(p.type.shape, np.dtype(p.type.dtype.numpy)) for p in fn.parameters]
        self.out_types = [(v.type.shape, np.dtype(v.type.dtype.numpy)) for v in fn.outputs]
        driver = self.runtime.driver
        self.module = driver.module_from_buffer(ptx.encode())
        defined = set(entry_names(ptx))
        functions = {}
        for spec in lowering.specs:
            assert spec.name in defined, f"the PTX lacks kernel {spec.name}"
            function = self.module.get_function(spec.name)
            function.prepare("P" * len(spec.slots))
            functions[spec.name] = function
        self.arrays = [self.runtime.put(a) for a in lowering.arrays]
        self.host = HostProgram(_GpuDevice(driver, functions), [a.pointer for a in self.arrays])
        self.symbolic = SymbolicCall.of(module, self.plan)

    def _device_arguments(self, args: Sequence[object]) -> list[DeviceArray]:
        rt = self.runtime
        return [arg if isinstance(arg, DeviceArray) and arg.dtype == dtype else
                rt.put(np.asarray(arg, dtype=dtype, order="C"))
                for arg, (_, dtype) in zip(args, self.arg_types)]

    def _call_symbolic(self, args: Sequence[object]) -> list[DeviceArray]:
        """Bind the symbols from the arguments' shapes (checking the constraints), size the
        results, the workspace and the grids with them; the kernels read the values from a
        device copy of `dims`."""
        assert self.symbolic is not None
        rt = self.runtime
        inputs = self._device_arguments(args)
        call = self.symbolic.bind(inputs)
        outputs = [rt.empty(shape, dtype) for shape, (_, dtype) in
                   zip(call.shapes, self.out_types)]
        workspace = rt.allocate(call.workspace_bytes)
        dims = rt.put(call.dims)
        self.host.run(self.lowering.program, [a.pointer for a in inputs],
                      [a.pointer for a in outputs], int(workspace), call.symbols, dims.pointer)
        # Keep the inputs, the symbol values and the workspace alive until the kernels are done.
        rt.driver.Context.synchronize()
        return outputs

    def __call__(self, args: Sequence[object]) -> list[DeviceArray]:
        if self.symbolic is not None:
            return self._call_symbolic(args)
        rt = self.runtime
        inputs = []
        for n, (arg, (shape, dtype)) in enumerate(zip(args, self.arg_types)):
            if isinstance(arg, DeviceArray) and arg.dtype == dtype:
                device = arg
            else:
                device = rt.put(np.asarray(arg, dtype=dtype, order="C"))
            if device.shape != tuple(shape):
                raise TypeError(f"argument {n}: compiled for {dtype}{list(shape)}, got "
                                f"{device.dtype}{list(device.shape)}")
            inputs.append(device)
        outputs = [rt.empty(shape, dtype) for shape, dtype in self.out_types]
        workspace = rt.allocate(self.plan.workspace_bytes)
        self.host.run(self.lowering.program, [a.pointer for a in inputs],
                      [a.pointer for a in outputs], int(workspace))
        # Keep the inputs and the workspace alive until the kernels are done.
        rt.driver.Context.synchronize()
        return outputs
