"""What a wheel holds: every jitc subpackage and the runtime C files `jitc aot` compiles.

setup.py lists packages with `find_packages`, which skips a folder without `__init__.py`;
such a folder works in a source checkout and is silently missing from the wheel. The full
check (build a wheel, install it in a fresh environment, run it) is `.ci/wheel_check.sh`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from jitc.aot import abi

ROOT = Path(__file__).resolve().parent.parent


def test_every_folder_of_python_code_under_jitc_is_a_package() -> None:
    folders = {path.parent for path in (ROOT / "jitc").rglob("*.py")}
    missing = sorted(str(folder.relative_to(ROOT)) for folder in folders
                     if "__pycache__" not in folder.parts
                     and not (folder / "__init__.py").is_file())
    assert not missing, f"add an __init__.py to {missing}: without one the wheel lacks them"


def _setup_constant(name: str) -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py defines no {name}")


def test_the_wheel_carries_every_runtime_file_jitc_aot_compiles() -> None:
    shipped = set(_setup_constant("AOT_RUNTIME_FILES"))
    needed = {abi.ABI_HEADER.name, abi.POOL_SOURCE.name}
    for source in (abi.ABI_HEADER, abi.POOL_SOURCE):
        needed |= set(re.findall(r'#include "([^"]+)"', source.read_text()))
    assert needed <= shipped, f"add {sorted(needed - shipped)} to setup.py's AOT_RUNTIME_FILES"
    assert all((ROOT / "runtime" / name).is_file() for name in shipped)
