"""Pickling a jitted function: by reference, never with compiled code.

A receiving process compiles anew (or loads the code from the persistent cache, docs/cache.md).
`@jit` on a module-level function pickles as that module attribute; otherwise the function (by
reference, as pickle does functions) travels with the static and donated arguments and the
options given to `jit` (those left to their defaults, such as the thread count, take the
receiving process's own). It travels with a token too: a process that receives the same jitted
function many times (a Dask worker gets it with every task) makes one jitted function of it,
which compiles once per signature.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jitc.options import Options

if TYPE_CHECKING:
    from jitc.api import Jitted

# Jitted functions this process unpickled, by the sender's token, most recently used last; the
# bound keeps a process that receives ever new ones from holding all their machine code.
UNPICKLED_LIMIT = 32
_unpickled: OrderedDict[str, Jitted] = OrderedDict()
_unpickled_lock = threading.Lock()


def reduce(jitted: Jitted) -> str | tuple:
    """`Jitted.__reduce__`: a module attribute's qualified name, or the rebuilding call."""
    owner: Any = sys.modules.get(getattr(jitted, "__module__", ""))
    for part in getattr(jitted, "__qualname__", "<unnamed>").split("."):
        owner = getattr(owner, part, None)
    if owner is jitted:
        return jitted.__qualname__
    changes = {name: getattr(jitted.options, name) for name in sorted(jitted._explicit_options)}
    token = jitted.__dict__.setdefault("_pickle_token", uuid.uuid4().hex)
    return (unpickle, (jitted.fun, changes, tuple(sorted(jitted.signature.static_names)),
                       tuple(sorted(jitted.donate_argnums)), token, jitted.dynamic))


def unpickle(fun: Callable, option_changes: dict[str, Any], static_argnames: tuple[str, ...],
             donate_argnums: tuple[int, ...], token: str | None = None,
             dynamic: object = None) -> Jitted:
    from jitc.api import Jitted  # the api imports this module

    with _unpickled_lock:
        known = _unpickled.get(token) if token is not None else None
        if known is not None:
            _unpickled.move_to_end(token)
            return known
        jitted = Jitted(fun, Options().with_(**option_changes), (), static_argnames,
                        donate_argnums, explicit_options=option_changes, dynamic=dynamic)
        if token is not None:
            jitted._pickle_token = token  # passed on under the same token
            _unpickled[token] = jitted
            while len(_unpickled) > UNPICKLED_LIMIT:
                _unpickled.popitem(last=False)
        return jitted
