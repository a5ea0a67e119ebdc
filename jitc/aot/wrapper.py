"""The C ABI functions of a library, emitted as LLVM IR next to the kernels.

Written in IR rather than C so that one LLVM module makes the whole object: an object for
another architecture then needs no cross C compiler (see docs/aot.md). Per export:

    internal i32 @LIB.NAME.checked(i64 symbols..., ptr bufs..., ptr workspace)
                                   ; checks, then the entry
    i32 @NAME_with_workspace(i64 symbols..., ptr args..., ptr results..., ptr workspace)
    i32 @NAME(i64 symbols..., ptr args..., ptr results...)
                                   ; allocates the workspace for this call only
    i64 @NAME_workspace_bytes(i64 symbols...)   ; symbolic exports only

An export with symbolic dimensions takes each symbol's value first (in `sorted` order), checks
that they are not negative and satisfy the function's constraints (JITC_ERROR_BAD_DIMENSION
otherwise), and evaluates every size from them; its entry gets them as the `int64_t dims[]`
vector after the workspace pointer (docs/dynamic-shapes.md).

Nothing here writes to global memory: every call works on its own stack frame and workspace,
so the functions are reentrant.
"""

from __future__ import annotations

from llvmlite import ir

from jitc.aot import abi
from jitc.aot.abi import FunctionABI, LibraryABI
from jitc.backends.llvm import extents
from jitc.backends.llvm.types import I8, I32, I64, PTR, VOID, declare
from jitc.ir.symbolic import Constraint, is_static

I1 = ir.IntType(1)


def _status(code: int) -> ir.Constant:
    return ir.Constant(I32, code)


def _any(b: ir.IRBuilder, conditions: list[ir.Value]) -> ir.Value:
    result: ir.Value = ir.Constant(I1, 0)
    for c in conditions:
        result = b.or_(result, c)
    return result


def _return_if(b: ir.IRBuilder, condition: ir.Value, code: int, label: str) -> None:
    """Return `code` when `condition` holds, else go on in a new block."""
    fail = b.append_basic_block(f"{label}.fail")
    ok = b.append_basic_block(f"{label}.ok")
    b.cbranch(condition, fail, ok)
    b.position_at_end(fail)
    b.ret(_status(code))
    b.position_at_end(ok)


def _overlaps(b: ir.IRBuilder, p: ir.Value, p_bytes: ir.Value, q: ir.Value,
              q_bytes: ir.Value) -> ir.Value:
    pi, qi = b.ptrtoint(p, I64), b.ptrtoint(q, I64)
    p_end = b.add(pi, p_bytes)
    q_end = b.add(qi, q_bytes)
    return b.and_(b.icmp_unsigned("<", pi, q_end), b.icmp_unsigned("<", qi, p_end))


def _signature(fn: FunctionABI, pointers: int) -> ir.FunctionType:
    return ir.FunctionType(I32, [I64] * len(fn.symbols) + [PTR] * pointers)


def _bind_symbols(b: ir.IRBuilder, fn: FunctionABI, values: list[ir.Value]) -> ir.Value | None:
    """The symbol values as an `int64_t dims[]` on the stack, bound for `extents.value`;
    None for a static export."""
    if not fn.symbols:
        return None
    dims = b.alloca(I64, ir.Constant(I64, len(fn.symbols)), name="dims")
    for n, v in enumerate(values):
        b.store(v, b.gep(dims, [ir.Constant(I64, n)], source_etype=I64, inbounds=True))
    extents.bind(b, dims, fn.symbols)
    return dims


def _constraint_broken(b: ir.IRBuilder, constraint: Constraint) -> ir.Value:
    lhs = extents.value(b, constraint.lhs)
    if constraint.relation == "%":
        return b.icmp_signed("!=", b.srem(lhs, extents.value(b, constraint.rhs)),
                             ir.Constant(I64, 0))
    holds = "==" if constraint.relation == "==" else ">="
    return b.not_(b.icmp_signed(holds, lhs, extents.value(b, constraint.rhs)))


def _check_dimensions(b: ir.IRBuilder, fn: FunctionABI, values: list[ir.Value]) -> None:
    """JITC_ERROR_BAD_DIMENSION unless every symbol is >= 0 and every constraint holds. The
    constraints are checked only once the symbols are known not to be negative, so no size
    computed from them can wrap."""
    zero = ir.Constant(I64, 0)
    _return_if(b, _any(b, [b.icmp_signed("<", v, zero) for v in values]), abi.BAD_DIMENSION,
               "negative")
    if fn.constraints:
        _return_if(b, _any(b, [_constraint_broken(b, c) for c in fn.constraints]),
                   abi.BAD_DIMENSION, "constraint")


def _emit_checked(module: ir.Module, fn: FunctionABI, entry: ir.Function,
                  name: str) -> ir.Function:
    """The argument checks of the ABI, then one call of the compiled entry function."""
    buffers = fn.buffers
    checked = ir.Function(module, _signature(fn, len(buffers) + 1), name)
    checked.linkage = "internal"
    symbol_values = list(checked.args[:len(fn.symbols)])
    *pointers, workspace = checked.args[len(fn.symbols):]
    b = ir.IRBuilder(checked.append_basic_block("entry"))
    dims = _bind_symbols(b, fn, symbol_values)
    if dims is not None:
        _check_dimensions(b, fn, symbol_values)
    null = ir.Constant(PTR, None)
    zero = ir.Constant(I64, 0)
    # Zero-element arrays are never read or written, so their pointers may be anything.
    sized = [(p, extents.value(b, a.type.nbytes)) for p, a in zip(pointers, buffers)
             if not is_static(a.type.nbytes) or a.type.nbytes]
    _return_if(b, _any(b, [b.and_(b.icmp_unsigned("==", p, null),
                                  b.icmp_signed("!=", n, zero)) for p, n in sized]),
               abi.NULL_POINTER, "null")
    # Results and written arguments are written; only they must not overlap other buffers.
    results = {id(p) for p in pointers[len(fn.args):]} | {id(pointers[i]) for i in fn.written}
    clashes = []
    for i, (p, n) in enumerate(sized):
        if id(p) not in results:
            continue
        for j, (q, m) in enumerate(sized):
            # Arguments are only read, so they may overlap one another; each pair of results
            # is checked once.
            if j != i and (id(q) not in results or j < i):
                clashes.append(_overlaps(b, p, n, q, m))
    _return_if(b, _any(b, clashes), abi.OVERLAPPING_BUFFERS, "overlap")
    if not is_static(fn.workspace_bytes) or fn.workspace_bytes:
        misaligned = b.icmp_unsigned(
            "!=", b.and_(b.ptrtoint(workspace, I64), ir.Constant(I64, abi.WORKSPACE_ALIGNMENT - 1)),
            ir.Constant(I64, 0))
        bad = b.or_(b.icmp_unsigned("==", workspace, null), misaligned)
        _return_if(b, bad, abi.BAD_WORKSPACE, "workspace")
    # The entry reads [args..., results..., new values of written args..., workspace]
    # (constants are baked into the module). A written argument's new value is computed in
    # scratch space at the end of the workspace, then copied over the argument.
    scratch = [b.gep(workspace, [extents.value(b, offset)], source_etype=I8, inbounds=True)
               for offset, _ in fn.scratch()]
    entries = [*pointers, *scratch, workspace, *([] if dims is None else [dims])]
    table = b.alloca(PTR, ir.Constant(I64, len(entries)), name="buffers")
    for i, p in enumerate(entries):
        b.store(p, b.gep(table, [ir.Constant(I64, i)], source_etype=PTR, inbounds=True))
    b.call(entry, [table])
    if fn.written:
        memcpy = module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
        for index, source, (_, size) in zip(fn.written, scratch, fn.scratch()):
            if not is_static(size) or size:
                b.call(memcpy, [pointers[index], source, extents.value(b, size),
                                ir.Constant(I1, 0)])
    b.ret(_status(abi.OK))
    return checked


def emit_export(module: ir.Module, fn: FunctionABI, entry_name: str, internal_prefix: str
                ) -> None:
    """Add `NAME` and `NAME_with_workspace` for the entry function `entry_name`."""
    entry = module.get_global(entry_name)
    checked = _emit_checked(module, fn, entry, f"{internal_prefix}checked")
    count = len(fn.buffers)

    with_ws = ir.Function(module, _signature(fn, count + 1), fn.with_workspace)
    b = ir.IRBuilder(with_ws.append_basic_block("entry"))
    b.ret(b.call(checked, list(with_ws.args)))

    if fn.symbols:
        _emit_workspace_function(module, fn)
    plain = ir.Function(module, _signature(fn, count), fn.c_name)
    b = ir.IRBuilder(plain.append_basic_block("entry"))
    if is_static(fn.workspace_bytes) and not fn.workspace_bytes:
        b.ret(b.call(checked, [*plain.args, ir.Constant(PTR, None)]))
        return
    symbol_values = list(plain.args[:len(fn.symbols)])
    if fn.symbols:
        # Checked before the workspace size is computed from them (and again by `checked`).
        _bind_symbols(b, fn, symbol_values)
        _check_dimensions(b, fn, symbol_values)
    aligned_alloc = declare(module, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
    free = declare(module, "free", ir.FunctionType(VOID, [PTR]))
    # workspace_bytes is a multiple of the alignment, as C11's aligned_alloc requires.
    workspace = b.call(aligned_alloc, [ir.Constant(I64, abi.WORKSPACE_ALIGNMENT),
                                       extents.value(b, fn.workspace_bytes)])
    _return_if(b, b.icmp_unsigned("==", workspace, ir.Constant(PTR, None)),
               abi.OUT_OF_MEMORY, "alloc")
    status = b.call(checked, [*plain.args, workspace])
    b.call(free, [workspace])
    b.ret(status)


def _emit_workspace_function(module: ir.Module, fn: FunctionABI) -> None:
    """`NAME_workspace_bytes(symbols...)`: the bytes NAME_with_workspace needs for those
    sizes (0 when they are negative or break a constraint: no call accepts them)."""
    sizing = ir.Function(module, ir.FunctionType(I64, [I64] * len(fn.symbols)),
                         fn.workspace_function)
    b = ir.IRBuilder(sizing.append_basic_block("entry"))
    values = list(sizing.args)
    _bind_symbols(b, fn, values)
    bad: list[ir.Value] = [b.icmp_signed("<", v, ir.Constant(I64, 0)) for v in values]
    bad_any = _any(b, bad)
    with b.if_then(bad_any):
        b.ret(ir.Constant(I64, 0))
    if fn.constraints:
        with b.if_then(_any(b, [_constraint_broken(b, c) for c in fn.constraints])):
            b.ret(ir.Constant(I64, 0))
    b.ret(extents.value(b, fn.workspace_bytes))


def _string(module: ir.Module, name: str, text: str) -> ir.GlobalVariable:
    data = bytearray(text.encode()) + b"\0"
    value = ir.GlobalVariable(module, ir.ArrayType(I8, len(data)), name)
    value.global_constant = True
    value.linkage = "private"
    value.unnamed_addr = True
    value.initializer = ir.Constant(value.value_type, data)
    return value


def _string_function(module: ir.Module, name: str, text: str) -> None:
    fn = ir.Function(module, ir.FunctionType(PTR, []), name)
    ir.IRBuilder(fn.append_basic_block("entry")).ret(_string(module, f"{name}.text", text))


def emit_library_functions(module: ir.Module, lib: LibraryABI, manifest: str) -> None:
    """`NAME_error_string`, `NAME_jitc_version`, `NAME_target_cpu` and `NAME_jitc_manifest`."""
    messages = [_string(module, f"{lib.name}.status{code}", message)
                for code, (_, message) in sorted(abi.STATUS.items())]
    table_type = ir.ArrayType(PTR, len(messages))
    table = ir.GlobalVariable(module, table_type, f"{lib.name}.status_messages")
    table.global_constant = True
    table.linkage = "private"
    table.initializer = ir.Constant(table_type, messages)
    unknown = _string(module, f"{lib.name}.status_unknown", abi.UNKNOWN_STATUS)

    fn = ir.Function(module, ir.FunctionType(PTR, [I32]), lib.error_string)
    (code,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    index = b.zext(code, I64)
    known = b.icmp_unsigned("<", index, ir.Constant(I64, len(messages)))
    with b.if_then(known):
        address = b.gep(table, [ir.Constant(I64, 0), index], source_etype=table_type,
                        inbounds=True)
        b.ret(b.load(address, typ=PTR))
    b.ret(unknown)

    _string_function(module, lib.version_function, lib.jitc_version)
    _string_function(module, lib.cpu_function, lib.cpu)
    _string_function(module, lib.manifest_function, manifest)
