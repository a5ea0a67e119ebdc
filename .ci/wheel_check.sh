#!/usr/bin/env bash
# CI: jitc as a user gets it. Build the sdist and, from it, the wheel; install the wheel into a
# fresh virtual environment; then, from a folder outside the checkout, run the console script,
# a jitted function against numpy, and `jitc aot` with a C client linked against the library.
# An editable install hides what a wheel lacks (a subpackage, the runtime's C files).
set -Eeuo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/jitc-wheel-check.XXXXXX")"
trap 'rm -rf "$work"' EXIT
passed=0
current="building the wheel"
trap 'echo "wheel check: FAILED while $current" >&2; echo "wheel check: $passed passed, 1 failed"' ERR

python3 -m build --outdir "$work/dist" "$checkout" >"$work/build.log" 2>&1 \
    || { tail -n 30 "$work/build.log" >&2; false; }
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$work"/dist/*.whl
mkdir "$work/user"
cd "$work/user"
unset PYTHONPATH
export PATH="$work/venv/bin:$PATH"

pass() { passed=$((passed + 1)); echo "wheel check: $current: ok"; }

current="comparing the installed modules with the checkout's"
python - "$checkout" <<'EOF'
import sys
from pathlib import Path

import jitc

installed = Path(jitc.__file__).parent
assert installed.is_relative_to(sys.prefix), f"jitc imported from {installed}, not the venv"
source = Path(sys.argv[1]) / "jitc"
def modules(root):
    return {str(p.relative_to(root)) for p in root.rglob("*.py") if "__pycache__" not in p.parts}
missing = modules(source) - modules(installed)
assert not missing, f"the wheel lacks {sorted(missing)}"
for name in sorted(modules(installed)):
    dotted = "jitc." + name.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    if not dotted.endswith("__main__"):  # which would run the command line
        __import__(dotted)
EOF
pass

current="running jitc demo"
jitc demo >demo.txt
grep -q "max |jitc - numpy|" demo.txt
pass

current="comparing a jitted function with numpy"
python <<'EOF'
import numpy as np

import jitc

def layer(x, w, b):
    return np.tanh(x @ w + b).sum(axis=0)

rng = np.random.default_rng(0)
args = (rng.standard_normal((64, 32), np.float32), rng.standard_normal((32, 16), np.float32),
        rng.standard_normal(16, np.float32))
got = jitc.jit(layer)(*args)
np.testing.assert_allclose(got, layer(*args), rtol=1e-4, atol=1e-4)
assert got.dtype == np.float32 and got.shape == (16,)
EOF
pass

current="building a threaded library with jitc aot and calling it from C"
cat >model.py <<'EOF'
import numpy as np

import jitc


@jitc.export("f32[1024,256]")
def row_sums(x):
    return (2.0 * x + 1.0).sum(axis=1)
EOF
cat >client.c <<'EOF'
#include <math.h>
#include <stdio.h>

#include "libmodel.h"

static float x[ROW_SUMS_ARG0_SIZE];
static float sums[ROW_SUMS_RES0_SIZE];

int main(void) {
    for (long i = 0; i < ROW_SUMS_ARG0_SIZE; i++)
        x[i] = (float)(i % 7) - 3.0f;
    int status = row_sums(x, sums);
    if (status != JITC_OK) {
        fprintf(stderr, "row_sums: %s\n", model_error_string(status));
        return 1;
    }
    for (long row = 0; row < 1024; row++) {
        double want = 0.0;
        for (long col = 0; col < 256; col++)
            want += 2.0 * x[row * 256 + col] + 1.0;
        if (fabs(sums[row] - want) > 1e-3 * (1.0 + fabs(want))) {
            fprintf(stderr, "row %ld: got %g, want %g\n", row, sums[row], want);
            return 1;
        }
    }
    printf("client ok\n");
    return 0;
}
EOF
jitc aot model.py -o libmodel.so --threads 2 >/dev/null
cc -std=c11 -O1 client.c -I. -L. -lmodel -lm -Wl,-rpath,"$PWD" -o client
[ "$(./client)" = "client ok" ]
# The pool's C source comes from the wheel's package data: a threaded build compiled it in.
python -c "import ctypes, json; f = ctypes.CDLL('./libmodel.so').model_jitc_manifest;
f.restype = ctypes.c_char_p; assert json.loads(f())['threads'] == 2, f()"
pass

current="running jitc bench from the wheel"
status=0
jitc bench --quick 2>bench.txt || status=$?
[ "$status" -eq 2 ]
grep -q "source checkout" bench.txt
pass

echo "wheel check: $passed passed, 0 failed"
