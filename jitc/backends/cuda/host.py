"""The host side of a lowered program: kernel launches in program order, with control flow
(control.py) driven from the host between them.

The same code drives the GPU (runtime.py, through pycuda) and the grid simulator
(simulator.py); only the `Device` differs. Addresses are plain integers: device pointers on
the GPU, host pointers in the simulator.

A symbolic program (docs/dynamic-shapes.md) runs with its call's symbol values: they place
the temporaries (and control flow's carries and scratch) in the workspace, set each launch's
block count and the bytes of each carry copy, and reach the kernels, the regions' too, as the
device buffer `dims` (the frame's `dims_slot`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from jitc.backends.cuda.control import (
    Conditional,
    CountedLoop,
    Extent,
    Literal,
    Program,
    Source,
    Uploaded,
    WhileLoop,
)
from jitc.backends.cuda.kernel import KernelSpec
from jitc.ir.ops.control import INDEX_DTYPE, branch_index
from jitc.ir.symbolic import DimLike, evaluate


class Device(Protocol):
    def launch(self, spec: KernelSpec, pointers: Sequence[int], blocks: int) -> None:
        """Launch `spec` with `blocks` blocks on these buffers, after everything launched
        before."""

    def copy(self, target: int, source: int, nbytes: int) -> None:
        """Device-to-device copy, ordered after the launches before it."""

    def read(self, source: int, nbytes: int) -> bytes:
        """Device-to-host copy; waits for the launches before it."""


@dataclass(frozen=True)
class _Call:
    """What every step of one call shares: its symbol values by name (empty for a static
    program) and the device address of their vector."""

    symbols: Mapping[str, int]
    dims: int

    def size(self, extent: DimLike) -> int:
        return evaluate(extent, self.symbols)


class HostProgram:
    """Runs programs on `device`; `arrays` are the device addresses of Lowering.arrays."""

    def __init__(self, device: Device, arrays: Sequence[int]) -> None:
        self.device = device
        self.arrays = list(arrays)

    def run(self, program: Program, args: Sequence[int], outputs: Sequence[int],
            workspace: int, symbols: Mapping[str, int] | None = None, dims: int = 0) -> None:
        """Run `program`; a symbolic one with its call's `symbols` (name -> value) and `dims`,
        the device address of their values in `sorted(symbols)` order."""
        self._run(program, args, outputs, workspace, _Call(symbols or {}, dims))

    def _run(self, program: Program, args: Sequence[int], outputs: Sequence[int],
             workspace: int, call: _Call) -> None:
        frame = self._frame(program, args, outputs, workspace, call)
        for step in program.steps:
            if isinstance(step, KernelSpec):
                blocks = step.launch.blocks(call.symbols)
                if blocks:
                    self.device.launch(step, [frame[s] for s in step.slots], blocks)
            elif isinstance(step, WhileLoop):
                self._run_while(step, frame, workspace, call)
            else:
                self._run_conditional(step, frame, workspace, call)

    def _frame(self, program: Program, args: Sequence[int], outputs: Sequence[int],
               workspace: int, call: _Call) -> list[int]:
        plan = program.plan
        env = call.symbols
        frame = [*args, *outputs, *(self.arrays[k] for k in program.constants)]
        frame.extend([0] * (plan.num_slots - len(frame)))
        for slot, offset in plan.temp_offsets.items():
            frame[slot] = workspace + evaluate(offset, env)
        for slot, (base, offset) in sorted(plan.views.items()):
            frame[slot] = frame[base] + evaluate(offset, env)
        if plan.dims_slot is not None:
            frame[plan.dims_slot] = call.dims
        return frame

    def _address(self, source: Source, frame: Sequence[int]) -> int:
        return self.arrays[source.index] if isinstance(source, Uploaded) else frame[source]

    def _scalar(self, source: Source | Literal, frame: Sequence[int], dtype: np.dtype) -> int:
        if isinstance(source, Literal):
            return source.value
        data = self.device.read(self._address(source, frame), dtype.itemsize)
        return int(np.frombuffer(data, dtype)[0])

    def _trip_count(self, counted: CountedLoop, frame: Sequence[int], call: _Call) -> int:
        start = self._scalar(counted.start, frame, counted.dtype)
        stop = call.size(counted.stop.size) if isinstance(counted.stop, Extent) else \
            self._scalar(counted.stop, frame, counted.dtype)
        return max(stop - start, 0)

    def _run_while(self, step: WhileLoop, frame: Sequence[int], workspace: int,
                   call: _Call) -> None:
        device = self.device
        scratch = workspace + call.size(step.scratch_offset)
        results = [frame[s] for s in step.results]
        nbytes = [call.size(n) for n in step.nbytes]
        for result, operand, size in zip(results, step.operands, nbytes):
            source = self._address(operand, frame)
            if result != source and size:
                device.copy(result, source, size)
        current = list(results)                                 # where each carry is (A)
        spare = {i: scratch + call.size(o)                      # (B)
                 for i, o in zip(step.moving, step.spare_offsets)}
        blocks = [scratch + call.size(o) for o in step.block_offsets]
        predicate = scratch + call.size(step.predicate_offset)
        regions = scratch + call.size(step.region_offset)
        trips = None if step.counted is None else self._trip_count(step.counted, frame, call)
        # Each block write's grid for this call, and the symbol values a symbolic program's
        # block write takes last, as every kernel of it does.
        writes = [(write, write.spec.launch.blocks(call.symbols),
                   [call.dims] if write.spec.symbols else []) for write in step.writes]
        done = 0
        while True:
            if trips is None:
                self._run(step.cond, current, [predicate], regions, call)
                if not device.read(predicate, 1)[0]:
                    break
            elif done == trips:
                break
            self._run(step.body, current, [spare[i] for i in step.moving] + blocks, regions,
                      call)
            for write, write_blocks, dims in writes:
                if write_blocks:
                    device.launch(write.spec, [current[write.carry], blocks[write.block],
                                               *(blocks[s] for s in write.starts), *dims],
                                  write_blocks)
            for i in step.moving:
                current[i], spare[i] = spare[i], current[i]
            done += 1
        for i in step.moving:
            if current[i] != results[i] and nbytes[i]:
                device.copy(results[i], current[i], nbytes[i])

    def _run_conditional(self, step: Conditional, frame: Sequence[int], workspace: int,
                         call: _Call) -> None:
        index = self._scalar(step.index, frame, np.dtype(INDEX_DTYPE.numpy))
        branch = step.branches[branch_index(index, len(step.branches))]
        self._run(branch, [self._address(v, frame) for v in step.operands],
                  [frame[s] for s in step.results],
                  workspace + call.size(step.scratch_offset), call)
