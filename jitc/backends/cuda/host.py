"""The host side of a lowered program: kernel launches in program order, with control flow
(control.py) driven from the host between them.

The same code drives the GPU (runtime.py, through pycuda) and the grid simulator
(simulator.py); only the `Device` differs. Addresses are plain integers: device pointers on
the GPU, host pointers in the simulator.

A symbolic program (docs/dynamic-shapes.md) runs with its call's symbol values: they place
the temporaries in the workspace, set each launch's block count, and reach the kernels as the
device buffer `dims` (the frame's `dims_slot`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from jitc.backends.cuda.control import (
    Conditional,
    CountedLoop,
    Literal,
    Program,
    Source,
    Uploaded,
    WhileLoop,
)
from jitc.backends.cuda.kernel import KernelSpec
from jitc.ir.ops.control import INDEX_DTYPE, branch_index
from jitc.ir.symbolic import evaluate


class Device(Protocol):
    def launch(self, spec: KernelSpec, pointers: Sequence[int], blocks: int) -> None:
        """Launch `spec` with `blocks` blocks on these buffers, after everything launched
        before."""

    def copy(self, target: int, source: int, nbytes: int) -> None:
        """Device-to-device copy, ordered after the launches before it."""

    def read(self, source: int, nbytes: int) -> bytes:
        """Device-to-host copy; waits for the launches before it."""


class HostProgram:
    """Runs programs on `device`; `arrays` are the device addresses of Lowering.arrays."""

    def __init__(self, device: Device, arrays: Sequence[int]) -> None:
        self.device = device
        self.arrays = list(arrays)

    def run(self, program: Program, args: Sequence[int], outputs: Sequence[int],
            workspace: int, symbols: Mapping[str, int] | None = None, dims: int = 0) -> None:
        """Run `program`; a symbolic one with its call's `symbols` (name -> value) and `dims`,
        the device address of their values in `sorted(symbols)` order."""
        env = symbols or {}
        frame = self._frame(program, args, outputs, workspace, env, dims)
        for step in program.steps:
            if isinstance(step, KernelSpec):
                blocks = step.launch.blocks(env)
                if blocks:
                    self.device.launch(step, [frame[s] for s in step.slots], blocks)
            elif isinstance(step, WhileLoop):
                self._run_while(step, frame, workspace)
            else:
                self._run_conditional(step, frame, workspace)

    def _frame(self, program: Program, args: Sequence[int], outputs: Sequence[int],
               workspace: int, env: Mapping[str, int], dims: int) -> list[int]:
        plan = program.plan
        frame = [*args, *outputs, *(self.arrays[k] for k in program.constants)]
        frame.extend([0] * (plan.num_slots - len(frame)))
        for slot, offset in plan.temp_offsets.items():
            frame[slot] = workspace + evaluate(offset, env)
        for slot, (base, offset) in sorted(plan.views.items()):
            frame[slot] = frame[base] + evaluate(offset, env)
        if plan.dims_slot is not None:
            frame[plan.dims_slot] = dims
        return frame

    def _address(self, source: Source, frame: Sequence[int]) -> int:
        return self.arrays[source.index] if isinstance(source, Uploaded) else frame[source]

    def _scalar(self, source: Source | Literal, frame: Sequence[int], dtype: np.dtype) -> int:
        if isinstance(source, Literal):
            return source.value
        data = self.device.read(self._address(source, frame), dtype.itemsize)
        return int(np.frombuffer(data, dtype)[0])

    def _trip_count(self, counted: CountedLoop, frame: Sequence[int]) -> int:
        start = self._scalar(counted.start, frame, counted.dtype)
        stop = self._scalar(counted.stop, frame, counted.dtype)
        return max(stop - start, 0)

    def _run_while(self, step: WhileLoop, frame: Sequence[int], workspace: int) -> None:
        device = self.device
        scratch = workspace + step.scratch_offset
        results = [frame[s] for s in step.results]
        for result, operand, nbytes in zip(results, step.operands, step.nbytes):
            source = self._address(operand, frame)
            if result != source and nbytes:
                device.copy(result, source, nbytes)
        current = list(results)                                 # where each carry is (A)
        spare = {i: scratch + o for i, o in zip(step.moving, step.spare_offsets)}  # (B)
        blocks = [scratch + o for o in step.block_offsets]
        predicate = scratch + step.predicate_offset
        regions = scratch + step.region_offset
        trips = None if step.counted is None else self._trip_count(step.counted, frame)
        done = 0
        while True:
            if trips is None:
                self.run(step.cond, current, [predicate], regions)
                if not device.read(predicate, 1)[0]:
                    break
            elif done == trips:
                break
            self.run(step.body, current, [spare[i] for i in step.moving] + blocks, regions)
            for write in step.writes:
                device.launch(write.spec, [current[write.carry], blocks[write.block],
                                           *(blocks[s] for s in write.starts)],
                              write.spec.launch.grid)
            for i in step.moving:
                current[i], spare[i] = spare[i], current[i]
            done += 1
        for i in step.moving:
            if current[i] != results[i] and step.nbytes[i]:
                device.copy(results[i], current[i], step.nbytes[i])

    def _run_conditional(self, step: Conditional, frame: Sequence[int], workspace: int) -> None:
        index = self._scalar(step.index, frame, np.dtype(INDEX_DTYPE.numpy))
        branch = step.branches[branch_index(index, len(step.branches))]
        self.run(branch, [self._address(v, frame) for v in step.operands],
                 [frame[s] for s in step.results], workspace + step.scratch_offset)
