"""Flattening nested tuples, lists, dicts and None into leaves, and back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree; hashable, so it can be part of a cache key."""

    kind: str                 # "leaf", "none", "tuple", "list", "dict", "namedtuple"
    children: tuple[TreeDef, ...] = ()
    meta: Any = None          # dict keys, or the namedtuple class

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


LEAF = TreeDef("leaf")


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(tree: Any, leaves: list[Any], is_leaf) -> TreeDef:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return LEAF
    if tree is None:
        return TreeDef("none")
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return TreeDef("namedtuple", tuple(_flatten(c, leaves, is_leaf) for c in tree),
                       type(tree))
    if isinstance(tree, (tuple, list)):
        kind = "tuple" if isinstance(tree, tuple) else "list"
        return TreeDef(kind, tuple(_flatten(c, leaves, is_leaf) for c in tree))
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        return TreeDef("dict", tuple(_flatten(tree[k], leaves, is_leaf) for k in keys), keys)
    leaves.append(tree)
    return LEAF


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    it = iter(leaves)
    result = _unflatten(treedef, it)
    return result


def _unflatten(treedef: TreeDef, it) -> Any:
    kind = treedef.kind
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    children = [_unflatten(c, it) for c in treedef.children]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "namedtuple":
        return treedef.meta(*children)
    return dict(zip(treedef.meta, children))


def leaf_paths(tree: Any, prefix: str = "") -> list[str]:
    """Readable names of the leaves (`params_w1`, `xs_0`) used as IR value names."""
    if tree is None:
        return []
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return [p for field, c in zip(tree._fields, tree)
                for p in leaf_paths(c, f"{prefix}_{field}")]
    if isinstance(tree, (tuple, list)):
        return [p for i, c in enumerate(tree) for p in leaf_paths(c, f"{prefix}_{i}")]
    if isinstance(tree, dict):
        return [p for k in sorted(tree) for p in leaf_paths(tree[k], f"{prefix}_{k}")]
    return [prefix]
