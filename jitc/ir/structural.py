"""Structural identity of functions: a digest that is equal for two functions exactly when they
compute the same values from the same parameters, whatever their values are named, where their
instructions came from, or in which order independent instructions are listed.

The backends key compiled kernels by it: the layers of a model are traced as separate fusion
bodies (`%blocks_0_2` in one, `%blocks_1_2` in the next, with constants hoisted in different
orders), yet each distinct computation needs its code generated only once.

The digest is a Merkle hash over the value graph: each value's digest covers its op, its
attributes (literals by their bit pattern, called functions by their own structural digest),
its result type and its operands' digests; a parameter's covers its index and type. The
function's digest covers its outputs' digests in order. Instructions no output depends on do not
change what the function computes and do not change its digest.
"""

from __future__ import annotations

import hashlib

from jitc.ir.core import Function, Literal, Module
from jitc.ir.opdef import AttrKind


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _attr_text(value: object, calls: bool, module: Module | None,
               memo: dict[str, str]) -> str:
    """An attribute's value; `calls`: it names functions (FUNCTION and FUNCTIONS attributes)."""
    if isinstance(value, Literal):
        dtype, shape, pattern = value._key
        return f"lit({dtype},{shape},{pattern.hex()})"
    if calls and isinstance(value, str) and module is not None and value in module.functions:
        # A called function (fusion bodies, loop conditions): by what it computes, not its name.
        return f"fn({function_key(module.functions[value], module, memo)})"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_attr_text(v, calls, module, memo) for v in value) + "]"
    return repr(value)


def function_key(fn: Function, module: Module | None = None,
                 memo: dict[str, str] | None = None) -> str:
    """The structural digest of `fn`. With `module`, the function attributes (a fusion's body,
    a loop's condition) are keyed by the digest of the function they name."""
    memo = {} if memo is None else memo
    if fn.name in memo:
        return memo[fn.name]
    # A function reached again while its digest is computed (no IR calls itself, but a
    # malformed one must not recurse forever) is keyed by its name.
    memo[fn.name] = f"@{fn.name}"
    digests: dict[int, str] = {}
    for inst in fn.body:
        operands = ",".join(digests.get(id(v), "?") for v in inst.operands)
        calls = {spec.name for spec in inst.op.attrs
                 if spec.kind in (AttrKind.FUNCTION, AttrKind.FUNCTIONS)}
        attrs = ";".join(f"{name}={_attr_text(value, name in calls, module, memo)}"
                         for name, value in sorted(inst.attrs.items()))
        types = ",".join(str(v.type) for v in inst.results)
        text = f"{inst.op.name}({operands}){{{attrs}}}:{types}"
        for index, result in enumerate(inst.results):
            digests[id(result)] = _digest(f"{text}#{index}")
    key = _digest("|".join(digests.get(id(v), "?") for v in fn.outputs))
    memo[fn.name] = key
    return key
