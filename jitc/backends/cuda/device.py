"""Arrays in GPU memory: what the cuda backend takes and returns.

Light on purpose (numpy only): `jitc.device_put` is importable on any machine, and pycuda is
imported only when an array is actually put on a device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from jitc.backends.cuda.runtime import Runtime


class DeviceArray:
    """An array in GPU memory. jitted functions on the cuda backend take and return these
    without copying; `np.asarray(a)` copies one to the host."""

    __jitc_array__ = True  # jitc.jit traces it as an array argument of this shape and dtype

    def __init__(self, allocation: Any, shape: tuple[int, ...], dtype: np.dtype,
                 runtime: Runtime) -> None:
        self.allocation = allocation
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.runtime = runtime

    @property
    def pointer(self) -> int:
        return int(self.allocation)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.runtime.to_host(self)
        return host if dtype is None else host.astype(dtype)

    def __getitem__(self, index: object) -> np.generic:
        """`a[()]` of a 0-d device array: its value as a numpy scalar on the host, which is
        how a jitted function returns what numpy returns as a scalar (`x.sum()`)."""
        if index == () and not self.shape:
            return np.asarray(self)[()]
        raise TypeError(f"a device array of shape {self.shape} is not indexed on the host: "
                        "index it inside the jitted function, or copy it with np.asarray(a) "
                        "first")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray({np.asarray(self)!r})"


def device_put(x: object) -> DeviceArray:
    """Copy an array to the GPU, where the cuda backend's kernels read it without a copy.

    Raises CudaUnavailable (a RuntimeError) without pycuda, a driver or a device."""
    if isinstance(x, DeviceArray):
        return x
    from jitc.backends.cuda.runtime import get_runtime
    return get_runtime().put(np.asarray(x))
