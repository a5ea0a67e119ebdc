"""How a row-major reshape maps dimensions, shared by the backends' index arithmetic."""

from __future__ import annotations

from collections.abc import Sequence

Groups = list[tuple[tuple[int, int], tuple[int, int]]]


def reshape_groups(source: Sequence[int], target: Sequence[int]) -> Groups | None:
    """The shortest runs of dimensions, [o0, o1) of `source` and [r0, r1) of `target`, whose
    sizes have equal products, in order (a row-major reshape maps each run to its partner);
    None when the sizes do not pair up so (a size 0).

    An output element's operand index is then found run by run: merging dimensions needs no
    division and splitting one no sum of the others, where the whole array's linear position
    needs both (that division and remainder kept GPT-2's split of q, k and v from being
    vectorized)."""
    if 0 in source or 0 in target:
        return None
    groups, o, r = [], 0, 0
    while o < len(source) or r < len(target):
        o_start, r_start = o, r
        o_size = r_size = 1
        while True:
            if o_size <= r_size and o < len(source):
                o_size *= source[o]
                o += 1
            elif r < len(target):
                r_size *= target[r]
                r += 1
            else:
                break
            if o_size == r_size and (o == len(source) or source[o] != 1 or
                                     r == len(target)):
                break
        if o_size != r_size:
            return None
        groups.append(((o_start, o), (r_start, r)))
    return groups
