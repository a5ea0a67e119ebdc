"""The rewrite: a float product with a weight becomes a byte product with its scales.

While the quantized function is traced, an interceptor (jitc.tracing.state.intercepting) sees
every `dot_general` before it is emitted. One whose operand is a weight (an array the function
closes over, reached through moves such as `.T` or a reshape) and whose other operand is a float
activation is emitted instead as

    xq = clip(round(x / sx), lo, hi).astype(int8 or uint8)       # the activation
    acc = xq.astype(int32) @ Wq.astype(int32)                    # numpy's int8 idiom
    y = acc.astype(float32) * (sx * sw)                          # sw per output channel

with `Wq`, `sw` computed once from the weight (symmetric int8, one scale per output channel),
`sx` a calibrated constant (static) or the largest magnitude of each row of `x` (dynamic). The
integer_dots pass then makes the middle line one byte product, and the CPU backend fuses the last
line (and whatever elementwise code follows, up to the next activation's quantization) into the
product's epilogue. A `convolution` whose kernel is a weight becomes the same three lines with
a convolution in the middle (`Rewriter._convolution`), which the convolution_products pass
makes patches and a byte product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from jitc import lax
from jitc.ir import ops
from jitc.ir.core import Instruction, Value
from jitc.ir.opdef import OpDef
from jitc.ir.ops.linalg import parse_dim_labels
from jitc.passes.convolution_products import MIN_OUT_FEATURES
from jitc.quant.observers import Observer
from jitc.quant.rounding import (
    INT8_MAX,
    UINT8_MAX,
    InputStatistics,
    compensated_values,
    nearest_values,
)
from jitc.tracing.state import current_trace, emit, trace_stack
from jitc.tracing.tracer import Tracer

# Ops that only move a weight's elements (or widen it): the weight is quantized after them.
MOVES = frozenset({ops.RESHAPE, ops.TRANSPOSE, ops.BROADCAST_IN_DIM, ops.CONVERT})
ROUNDING_SHIFT = 1.5 * 2**23                 # see _to_bytes
ROUNDING_SHIFT_BITS = 0x4B400000             # its float32 bits
SMALLEST_PEAK = 1e-30                        # an all-zero row: any scale will do


@dataclass
class QuantizedWeight:
    """A weight as one product reads it: int8 values and one scale per output channel."""

    values: np.ndarray            # int8, the operand's shape
    scales: np.ndarray            # float32, the output channels (batch then free dimensions)
    output_scales: np.ndarray     # `scales` shaped to broadcast against the product
    rounding: str = "nearest"     # or "compensated" (jitc/quant/rounding.py)


@dataclass
class Product:
    """One quantized product of the function: a weight's `occurrence`-th use."""

    weight: str                   # the weight's name (its path: `W1`, `self.fc.weight`)
    occurrence: int
    weight_shape: tuple[int, ...]
    weight_dtype: np.dtype
    observer: Observer | None = None       # calibration, when there was any
    static: bool = False                   # activation scale fixed at calibration
    activation_dtype: np.dtype = field(default_factory=lambda: np.dtype(np.int8))
    activation_scale: float | None = None  # static only
    quantized: QuantizedWeight | None = None
    # The activation's batch and contracted dimensions (set by calibration's trace).
    activation_dims: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    inputs: InputStatistics | None = None  # for compensated rounding
    hessian: np.ndarray | None = None      # E[x x^T] as estimated from `inputs`
    convolution: bool = False              # a convolution's kernel, not a product's operand

    @property
    def rounding(self) -> str:
        """How the weight was rounded: "compensated" or "nearest"."""
        return "nearest" if self.quantized is None else self.quantized.rounding

    def observe_inputs(self, values: np.ndarray) -> None:
        """Add a calibration activation's rows to `inputs`: every index of its dimensions
        other than the contracted ones, batch dimensions included (they serve a weight that
        is the same in every batch entry, a broadcast one; see quantize_weight)."""
        assert self.activation_dims is not None
        _, contract = self.activation_dims
        if not contract:
            return
        free = [d for d in range(values.ndim) if d not in contract]
        rows = np.transpose(values, free + list(contract))
        rows = rows.reshape(-1, int(np.prod([values.shape[d] for d in contract])))
        if self.inputs is None:
            self.inputs = InputStatistics(rows.shape[1])
        self.inputs.update(rows)

    @property
    def key(self) -> tuple[str, int]:
        return self.weight, self.occurrence

    @property
    def zero_point(self) -> int:
        return 0  # symmetric int8, and uint8 only for values >= 0

    def __repr__(self) -> str:
        return f"<Product {self.describe()}>"

    def describe(self) -> str:
        shape = "x".join(map(str, self.weight_shape))
        if self.static:
            activation = (f"static {self.activation_dtype} scale {self.activation_scale:.6g} "
                          f"zero point {self.zero_point}")
        else:
            activation = "dynamic int8, one scale per " + (
                "batch entry" if self.convolution else "row")
        text = f"{self.weight}[{shape}] (use {self.occurrence}): activations {activation}"
        if self.quantized is not None:
            scales = self.quantized.scales
            text += (f"; weight int8 ({self.rounding} rounding), {scales.size} per-channel "
                     f"scales in [{scales.min():.3g}, {scales.max():.3g}], zero point 0")
        return text


class Plan:
    """The weights to quantize and what calibration decided for each product."""

    def __init__(self, weights: Mapping[int, tuple[str, np.ndarray]], min_channels: int = 1
                 ) -> None:
        self.weights = dict(weights)   # id(array) -> (name, array)
        self.min_channels = min_channels
        # Weights whose products stay float because they are narrow: name -> (shape, channels)
        self.left_float: dict[str, tuple[tuple[int, ...], int]] = {}
        # Products kept float32 to reach an agreement target (jitc/quant/selection.py):
        # key -> why, as the report says it
        self.kept_float: dict[tuple[str, int], str] = {}
        self.products: dict[tuple[str, int], Product] = {}
        self._quantized: dict[tuple, QuantizedWeight] = {}
        # How each product's weight was read (quantized_weight's arguments), to round it again
        self._recipes: dict[tuple[str, int], tuple] = {}

    def product(self, name: str, occurrence: int, weight: np.ndarray) -> Product:
        key = (name, occurrence)
        found = self.products.get(key)
        if found is None:
            found = self.products[key] = Product(name, occurrence, weight.shape, weight.dtype)
        return found

    def float_notes(self) -> list[str]:
        """The weights left in float, and why."""
        return [f"{name}[{'x'.join(map(str, shape))}]: left in float ({channels} output "
                f"channels, under min_channels={self.min_channels})"
                for name, (shape, channels) in self.left_float.items()] + \
            list(self.kept_float.values())

    def quantized_weight(self, product: Product, weight_id: int, moves: Sequence[Instruction],
                         side: int, attrs: Mapping[str, object], other_free: int
                         ) -> QuantizedWeight:
        """The weight as this product reads it; compensated rounding (after calibration)
        depends on the product's inputs, nearest rounding only on the weight."""
        self._recipes.setdefault(product.key, (weight_id, moves, side, attrs, other_free))
        key = (weight_id, tuple((m.op.name, m.attr_key(), m.results[0].type) for m in moves),
               side, other_free, tuple(sorted((k, str(v)) for k, v in attrs.items())),
               None if product.hessian is None else product.key)
        found = self._quantized.get(key)
        if found is None:
            _, array = self.weights[weight_id]
            for move in moves:  # the operand's value, from the op table's numpy reference
                array = move.op.reference([array], move.attrs,
                                          [r.type for r in move.results])[0]
            found = self._quantized[key] = quantize_weight(array, side, attrs, other_free,
                                                           product.hessian)
        return found

    def calibrated(self) -> None:
        """Estimate each product's input Hessian from its calibration statistics and round its
        weight again, with compensation."""
        for product in self.products.values():
            if product.inputs is not None:
                product.hessian = product.inputs.hessian()
        recipes = dict(self._recipes)
        self._quantized.clear()
        for key, recipe in recipes.items():
            product = self.products[key]
            product.quantized = self.quantized_weight(product, *recipe)


def _roles(rank: int, batch: Sequence[int], contract: Sequence[int]) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contract]


def _dims(attrs: Mapping[str, object], side: int) -> tuple[list[int], list[int]]:
    prefix = "lhs" if side == 0 else "rhs"
    return list(attrs[f"{prefix}_batch"]), list(attrs[f"{prefix}_contract"])  # type: ignore


def quantize_weight(array: np.ndarray, side: int, attrs: Mapping[str, object],
                    other_free: int, hessian: np.ndarray | None = None) -> QuantizedWeight:
    """Symmetric int8 with one scale per output channel (each index of the operand's batch
    and free dimensions); `other_free` counts the other operand's free dimensions. With the
    `hessian` of the product's inputs (over the contracted dimensions, flattened in the
    product's order) the rounding compensates errors (jitc/quant/rounding.py), else it is
    to the nearest level. A weight with batch dimensions is compensated only where it is the
    same in every batch entry (a broadcast weight, as `x3d @ W` makes; the Hessian then pools
    the batch entries' inputs): each entry of a truly batched weight meets other inputs."""
    batch, contract = _dims(attrs, side)
    wide = np.asarray(array, np.float64)
    peak = np.max(np.abs(wide), axis=tuple(contract), keepdims=True) if contract else \
        np.abs(wide)
    scales = np.where(peak > 0, peak / INT8_MAX, 1.0)
    first = tuple(slice(0, 1) if d in batch else slice(None) for d in range(wide.ndim))
    depth = int(np.prod([wide.shape[d] for d in contract]))
    if hessian is not None and contract and hessian.shape[0] == depth and \
            np.array_equal(wide, np.broadcast_to(wide[first], wide.shape)):
        values = np.broadcast_to(_compensated(wide[first], scales[first], contract, hessian),
                                 wide.shape).astype(np.int8)
        rounding = "compensated"
    else:
        values = nearest_values(wide, scales).astype(np.int8)
        rounding = "nearest"
    kept = [d for d in range(array.ndim) if d not in contract]
    free = _roles(array.ndim, batch, contract)
    channels = np.squeeze(scales, axis=tuple(contract)).transpose(
        [kept.index(d) for d in batch] + [kept.index(d) for d in free])
    sizes = [array.shape[d] for d in batch]
    free_sizes = [array.shape[d] for d in free]
    shape = sizes + ([1] * other_free + free_sizes if side == 1
                     else free_sizes + [1] * other_free)
    channels = channels.astype(np.float32)
    return QuantizedWeight(values, channels, channels.reshape(shape), rounding)


def _compensated(weight: np.ndarray, scales: np.ndarray, contract: Sequence[int],
                 hessian: np.ndarray) -> np.ndarray:
    """`compensated_values` of a weight laid out as rows (the contracted dimensions, in the
    product's order) by output channels, put back in the weight's layout."""
    free = [d for d in range(weight.ndim) if d not in contract]
    order = list(contract) + free
    moved = np.transpose(weight, order)
    width = hessian.shape[0]
    rows = moved.reshape(width, -1)
    channel_scales = np.transpose(scales, order).reshape(1, -1)
    values = compensated_values(rows, channel_scales[0], hessian).reshape(moved.shape)
    return np.transpose(values, np.argsort(order))


class Rewriter:
    """The interceptor of one trace of the function: `observe` only records the activations
    of the products (calibration), otherwise products are rewritten."""

    def __init__(self, plan: Plan, observe: bool = False) -> None:
        self.plan = plan
        self.observe = observe
        self.uses: dict[str, int] = {}
        self.observed: list[tuple[tuple[str, int], Tracer]] = []
        # The trace of the function itself: an activation inside a jitc.lax loop or branch
        # (a trace of its own) cannot be a result, so such products are not observed and
        # keep dynamic scales.
        self.trace = current_trace()

    def __call__(self, op: OpDef, operands: Sequence[Tracer], attrs: Mapping[str, object]
                 ) -> tuple[Tracer, ...] | None:
        if op is ops.CONVOLUTION:
            return self._convolution(operands, attrs)
        if op is not ops.DOT_GENERAL or attrs.get("result") or len(operands) != 2:
            return None
        if any(t.dtype.kind != "f" for t in operands):
            return None
        found = [self._weight(t.value) for t in operands]
        if (found[0] is None) == (found[1] is None):
            return None  # no weight, or a product of two weights (a constant)
        side = 0 if found[0] is not None else 1
        weight_id, moves = found[side]  # type: ignore[misc]
        contract = _dims(attrs, side)[1]
        channels = int(np.prod([operands[side].shape[d] for d in range(operands[side].ndim)
                                if d not in contract]))
        product = self._planned(weight_id, channels)
        if product is None:
            return None
        activation = operands[1 - side]
        x_batch, x_contract = _dims(attrs, 1 - side)
        x_free = _roles(activation.ndim, x_batch, x_contract)
        product.quantized = self.plan.quantized_weight(product, weight_id, moves, side, attrs,
                                                       len(x_free))
        if self.observe:
            product.activation_dims = (tuple(x_batch), tuple(x_contract))
            if current_trace() is self.trace:
                self.observed.append((product.key, activation))
            return None
        return (self._rewrite(product, product.quantized, side, activation, operands,
                              attrs),)

    def _planned(self, weight_id: int, channels: int) -> Product | None:
        """The plan's product for this use of weight `weight_id` with `channels` output
        channels; None when it stays float32: too narrow to gain (a classifier's logits,
        left_float) or kept float by `agreement` (kept_float)."""
        name, array = self.plan.weights[weight_id]
        if channels < self.plan.min_channels:
            self.plan.left_float[name] = (array.shape, channels)
            return None
        occurrence = self._use(name)
        if occurrence is None:
            return None
        return self.plan.product(name, occurrence, array)

    def _use(self, name: str) -> int | None:
        """Count a use of the weight `name`; its occurrence, or None when that product is
        kept float32 (kept_float)."""
        occurrence = self.uses.get(name, 0)
        self.uses[name] = occurrence + 1
        return None if (name, occurrence) in self.plan.kept_float else occurrence

    def _convolution(self, operands: Sequence[Tracer], attrs: Mapping[str, object]
                     ) -> tuple[Tracer, ...] | None:
        """A float convolution of an activation with a weight kernel, as the product above:
        the kernel int8 with one scale per output feature, the activation int8 or uint8 with
        one static scale or, dynamic, one per batch entry (a per-row scale, as products have,
        would differ between the inputs that one output sums). Zero stays zero, so the
        padding is the same. A grouped convolution with fewer than MIN_OUT_FEATURES output
        features per group (a depthwise one) stays float: the byte product
        (convolution_products) would not run it, and an int32 direct convolution is no
        faster than a float one."""
        x, kernel = operands
        if x.dtype.kind != "f" or kernel.dtype.kind != "f" or self._weight(x.value) is not None:
            return None
        found = self._weight(kernel.value)
        dims = parse_dim_labels(attrs["dim_labels"])  # type: ignore[arg-type]
        groups: int = attrs["feature_group_count"]  # type: ignore[assignment]
        if found is None or (groups > 1 and
                             kernel.shape[dims.rhs_out] // groups < MIN_OUT_FEATURES):
            return None
        weight_id, moves = found
        channels = kernel.shape[dims.rhs_out]
        product = self._planned(weight_id, channels)
        if product is None:
            return None
        product.convolution = True
        # The kernel as the rhs of a product contracting its input features and window.
        as_product = {"lhs_batch": [], "rhs_batch": [], "lhs_contract": [],
                      "rhs_contract": [dims.rhs_in, *dims.rhs_spatial]}
        weight = product.quantized = self.plan.quantized_weight(product, weight_id, moves, 1,
                                                                as_product, 0)
        if self.observe:
            product.activation_dims = ((), ())  # no input statistics: nearest rounding
            if current_trace() is self.trace:
                self.observed.append((product.key, x))
            return None
        out_type = np.result_type(x.dtype, kernel.dtype)
        x = x if x.dtype == np.float32 else x.astype(np.float32)
        out_rank = x.ndim
        channel_shape = [1] * out_rank
        channel_shape[dims.out_feature] = channels
        channel_scales = weight.scales.reshape(channel_shape)
        if product.static:
            xq, scale = _static_bytes(product, x, channel_scales)
        else:
            others = tuple(d for d in range(x.ndim) if d != dims.lhs_batch)
            peak = np.maximum(np.max(np.abs(x), axis=others), np.float32(SMALLEST_PEAK))
            top = UINT8_MAX if _non_negative(x.value) else INT8_MAX
            batch_shape = [1] * x.ndim
            batch_shape[dims.lhs_batch] = -1
            xq = _to_bytes(x * np.reshape(np.float32(top) / peak, batch_shape),
                           unsigned=top == UINT8_MAX)
            out_batch = [1] * out_rank
            out_batch[dims.out_batch] = -1
            scale = channel_scales * np.reshape(peak * np.float32(1 / top), out_batch)
        acc = emit(ops.CONVOLUTION, [xq.astype(np.int32),
                                     _constant(weight.values).astype(np.int32)], attrs)
        return (_dequantized(acc, scale, out_type),)

    def _weight(self, value: Value) -> tuple[int, list[Instruction]] | None:
        """(id of the weight array `value` is made of, the moves on the way), or None."""
        moves = []
        inst = value.producer
        while inst.op in MOVES:
            if inst.op is ops.CONVERT and inst.operands[0].type.dtype.numpy.kind != "f":
                return None
            moves.append(inst)
            inst = inst.operands[0].producer
        if inst.op is not ops.PARAMETER and inst.op is not ops.CONSTANT:
            return None
        root = inst.results[0]
        # A captured array is a parameter of the trace that captured it, a numpy array the
        # trace met uncaptured (jitc aot, a call from another traced function) a constant;
        # inside a jitc.lax region either may belong to an enclosing trace.
        for state in trace_stack():
            if inst.op is ops.PARAMETER:
                source = next((i for i, t in state.captured.items() if t.value is root), None)
            else:
                source = state.constant_source(root)
            if source in self.plan.weights:
                return source, moves[::-1]
        return None

    def _rewrite(self, product: Product, weight: QuantizedWeight, side: int, x: Tracer,
                 operands: Sequence[Tracer], attrs: Mapping[str, object]) -> Tracer:
        out_type = np.result_type(operands[0].dtype, operands[1].dtype)
        x_batch, x_contract = _dims(attrs, 1 - side)
        w_batch, w_contract = _dims(attrs, side)
        x_free = _roles(x.ndim, x_batch, x_contract)
        w_free = len(_roles(operands[side].ndim, w_batch, w_contract))
        x = x if x.dtype == np.float32 else x.astype(np.float32)
        if product.static:
            xq, scale = _static_bytes(product, x, weight.output_scales)
        else:
            peak = np.max(np.abs(x), axis=tuple(x_contract), keepdims=True) if x_contract \
                else np.abs(x)
            peak = np.maximum(peak, np.float32(SMALLEST_PEAK))
            # After a ReLU the activation cannot be negative: uint8 doubles the resolution.
            top = UINT8_MAX if _non_negative(x.value) else INT8_MAX
            xq = _to_bytes(x * (np.float32(top) / peak), unsigned=top == UINT8_MAX)
            row_scale = peak * np.float32(1 / top)
            scale = weight.output_scales * _aligned(row_scale, x_batch, x_contract, x_free,
                                                    side, w_free)
        pair = [xq.astype(np.int32), _constant(weight.values).astype(np.int32)]
        if side == 0:
            pair.reverse()
        acc = emit(ops.DOT_GENERAL, pair, attrs)
        return _dequantized(acc, scale, out_type)


def _static_bytes(product: Product, x: Tracer, weight_scales: np.ndarray
                  ) -> tuple[Tracer, np.ndarray]:
    """The activation `x` as bytes with the product's calibrated scale (uint8 after a ReLU),
    and the scale of the int32 result: the weight's scales times the activation's."""
    inverse = np.float32(1.0 / product.activation_scale)  # type: ignore[operator]
    xq = _to_bytes(x * inverse, product.activation_dtype == np.uint8)
    return xq, (weight_scales * np.float32(product.activation_scale)).astype(np.float32)


def _dequantized(acc: Tracer, scale: Tracer | np.ndarray, out_type: np.dtype) -> Tracer:
    """The int32 result `acc` scaled back to float32, in the float operation's dtype."""
    result = acc.astype(np.float32) * scale
    return result if result.dtype == out_type else result.astype(out_type)


def _non_negative(value: Value) -> bool:
    """Whether `value` is, through moves, `max(y, c)` with a constant c >= 0 (a ReLU)."""
    inst = value.producer
    while inst.op in MOVES and inst.op is not ops.CONVERT:
        inst = inst.operands[0].producer
    if inst.op is not ops.MAX:
        return False
    for operand in inst.operands:
        source = operand.producer
        while source.op is ops.BROADCAST_IN_DIM:
            source = source.operands[0].producer
        if source.op is ops.CONSTANT and np.all(source.attrs["value"].array >= 0):
            return True
    return False


def _to_bytes(scaled: Tracer, unsigned: bool) -> Tracer:
    """`np.clip(np.round(scaled), lo, hi).astype(int8 or uint8)`, without a float to integer
    conversion: adding 1.5 * 2**23 rounds a float32 of magnitude below 2**22 to an integer
    (half to even, as np.round) held in the low bits of its mantissa. The CPU backend's
    saturating conversion is scalar code, about 5x slower than this on 256x1024 values."""
    lo, hi = (0, UINT8_MAX) if unsigned else (-INT8_MAX, INT8_MAX)
    shifted = np.clip(scaled, lo, hi) + np.float32(ROUNDING_SHIFT)
    integers = lax.bitcast_convert_type(shifted, np.int32) - np.int32(ROUNDING_SHIFT_BITS)
    return integers.astype(np.uint8 if unsigned else np.int8)


def _aligned(row_scale: Tracer, batch: list[int], contract: list[int], free: list[int],
             weight_side: int, weight_free: int) -> Tracer:
    """The activation's per-row scale laid out like the product: batch, lhs free, rhs free."""
    kept = [d for d in range(row_scale.ndim) if d not in contract]
    squeezed = np.reshape(row_scale, [row_scale.shape[d] for d in kept])
    order = [kept.index(d) for d in batch] + [kept.index(d) for d in free]
    moved = np.transpose(squeezed, order) if order != sorted(order) else squeezed
    sizes = [row_scale.shape[d] for d in batch] + [row_scale.shape[d] for d in free]
    ones = [1] * weight_free
    shape = sizes + ones if weight_side == 1 else \
        sizes[:len(batch)] + ones + sizes[len(batch):]
    return np.reshape(moved, shape)


def _constant(array: np.ndarray) -> Tracer:
    stack = trace_stack()
    return stack[-1].constant(array)
