"""The benchmark workloads, each written once against a numpy-like namespace `xp`.

jitc traces the plain numpy version (`xp` is numpy), JAX runs it with `xp = jax.numpy`, numba
compiles it with `xp` = numpy where its numpy support allows.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# The group of rows of a backend that compiles here but runs elsewhere (cuda without a GPU):
# only jitc's trace and compile are timed (bench/runner.py compile_only_row).
COMPILE_ONLY = "compile only"


@dataclass
class Workload:
    name: str
    fn: Callable            # fn(xp, *args)
    make: Callable          # make(rng, quick) -> tuple of arrays (float32 unless named)
    group: str = ""
    static: dict = field(default_factory=dict)
    # A call form (dispatch rows): form(wrap, xp) wraps a function of its own with `wrap`
    # (jitc.jit, jax.jit, or nothing for numpy) and returns what calls it in that form.
    form: Callable | None = None
    # The jitc backend this row compiles for (the peers run only on "cpu" rows).
    backend: str = "cpu"


def elementwise(xp, a, b, c):
    return xp.tanh(a * b + c) * 0.5 + a


def gelu(xp, x):
    return 0.5 * x * (1 + xp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(xp, x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) * (x - mu)).mean(axis=-1, keepdims=True)
    return (x - mu) / xp.sqrt(var + 1e-5) * g + b


def sum_all(xp, x):
    return x.sum()


def sum_axis0(xp, x):
    return x.sum(axis=0)


def sum_axis1(xp, x):
    return x.sum(axis=1)


def matmul(xp, a, b):
    return a @ b


def int8_matmul(xp, a, b):
    """The numpy idiom of an int8 product with exact int32 sums (docs/quantization.md)."""
    return a.astype(xp.int32) @ b.astype(xp.int32)


def mlp(xp, x, w1, b1, w2, b2, w3, b3):
    h = xp.maximum(x @ w1 + b1, 0)
    h = xp.maximum(h @ w2 + b2, 0)
    return softmax(xp, h @ w3 + b3)


def mlp_logits(xp, x, w1, b1, w2, b2, w3, b3):
    """The MLP without its softmax (a classifier's logits): the float row of jitc.quant's."""
    h = xp.maximum(x @ w1 + b1, 0)
    h = xp.maximum(h @ w2 + b2, 0)
    return h @ w3 + b3


def quantized_form(model: Callable, weights: tuple[str, ...]) -> Callable:
    """A call form whose jitc row is `jitc.quant.quantize(model)` with the named arguments as
    weights, calibrated at the first call on 4 random batches shaped like its first argument;
    numpy's row is the float model, the reference of the error column (jitc.quant only)."""
    def form(wrap, xp):
        if xp is not np:
            raise TypeError("a jitc.quant row: numpy's float32 is its reference")
        names = list(inspect.signature(model).parameters)[1:]
        exec_namespace = {"model": model, "np": np}
        exec(f"def {model.__name__}({', '.join(names)}):\n"
             f"    return model(np, {', '.join(names)})\n", exec_namespace)
        float_model = exec_namespace[model.__name__]
        if getattr(wrap, "__module__", "") != "jitc.api":
            return float_model
        import jitc.quant
        state: dict = {}

        def call(x, *rest):
            if "quantized" not in state:
                rng = np.random.default_rng(1)
                calibration = [(_normal(rng, *x.shape), *rest) for _ in range(4)]
                state["quantized"] = jitc.quant.quantize(float_model, calibration,
                                                         weights=list(weights))
            return state["quantized"](x, *rest)
        return call
    return form


def rnn(xp, xs, h, wx, wh, b):
    for t in range(xs.shape[0]):
        h = xp.tanh(xs[t] @ wx + h @ wh + b)
    return h


def rnn_scan(xp, xs, h, wx, wh, b):
    """The RNN as one jitc.lax.scan: traced once whatever the step count (eager Python steps
    outside jitc)."""
    from jitc import lax

    def step(h, x):
        h = xp.tanh(x @ wx + h @ wh + b)
        return h, h
    return lax.scan(step, h, xs)[1]  # every step's h, stacked


def sigmoid(xp, z):
    return 1 / (1 + xp.exp(-z))


def lstm(xp, xs, h, c, w, b):
    for t in range(xs.shape[0]):
        z = xp.concatenate([xs[t], h], axis=1) @ w + b
        i, f, g, o = xp.split(z, 4, axis=-1)
        c = sigmoid(xp, f) * c + sigmoid(xp, i) * xp.tanh(g)
        h = sigmoid(xp, o) * xp.tanh(c)
    return h


def fill_rows(xp, x):
    """A Python loop writing every row of an np.empty array (traced: one update per row)."""
    out = xp.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * 2 + i
    return out


def sample_chars(xp, h, wxh, whh, why, steps):
    """min-char-rnn's sampler with argmax for the draw: each step's token selects the next
    step's one-hot input."""
    vocab = wxh.shape[1]
    x = xp.zeros((vocab, 1), xp.float32)
    x[0] = 1
    chosen = []
    for _ in range(steps.shape[0]):
        h = xp.tanh(xp.dot(wxh, x) + xp.dot(whh, h))
        ix = xp.argmax(xp.dot(why, h))
        x = xp.zeros((vocab, 1), xp.float32)
        x[ix] = 1
        chosen.append(ix)
    return xp.stack(chosen)


def gpt2_block(xp, x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_pr,
               b_pr):
    seq, d = x.shape
    heads = 12
    hd = d // heads
    h = layernorm(xp, x, ln1_g, ln1_b)
    qkv = h @ w_qkv + b_qkv
    q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
    q = q.reshape(seq, heads, hd).transpose(1, 0, 2)
    k = k.reshape(seq, heads, hd).transpose(1, 0, 2)
    v = v.reshape(seq, heads, hd).transpose(1, 0, 2)
    # A Python float scale: np.sqrt(hd) is an np.float64, which would promote the attention
    # (and everything after it) to float64 under numpy's rules in a float32 benchmark.
    scores = (q @ k.transpose(0, 2, 1)) * (1.0 / math.sqrt(hd))
    mask = xp.tri(seq, dtype=bool)
    scores = xp.where(mask, scores, -1e9)
    attn = softmax(xp, scores) @ v
    x = x + attn.transpose(1, 0, 2).reshape(seq, d) @ w_o + b_o
    h = layernorm(xp, x, ln2_g, ln2_b)
    return x + gelu(xp, h @ w_fc + b_fc) @ w_pr + b_pr


def gpt2_decode(xp, x, kc, vc, pos, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b,
                w_fc, b_fc, w_pr, b_pr):
    """One token through a GPT-2 block with a KV cache of heads x positions x head size,
    written in place at `pos` and attended through a mask of the positions so far."""
    d = x.shape[0]
    heads, length, hd = kc.shape
    h = layernorm(xp, x, ln1_g, ln1_b)
    qkv = h @ w_qkv + b_qkv
    q, k, v = qkv[:d], qkv[d:2 * d], qkv[2 * d:]
    kc[:, pos] = k.reshape(heads, hd)
    vc[:, pos] = v.reshape(heads, hd)
    scores = (kc @ q.reshape(heads, hd, 1))[..., 0] * (1.0 / math.sqrt(hd))
    scores = xp.where(xp.arange(length) <= pos, scores, -1e9)
    attn = (softmax(xp, scores)[:, None, :] @ vc)[:, 0, :].reshape(d)
    x = x + attn @ w_o + b_o
    h = layernorm(xp, x, ln2_g, ln2_b)
    return x + gelu(xp, h @ w_fc + b_fc) @ w_pr + b_pr


def _gpt2_decode_inputs(rng, quick):
    x, *weights = _gpt2_inputs(rng, quick)
    heads, length, hd = 12, 256, 64
    return (x[0], _normal(rng, heads, length, hd), _normal(rng, heads, length, hd), 100,
            *weights)


def cholesky(xp, a):
    return xp.linalg.cholesky(a)


def solve(xp, a, b):
    return xp.linalg.solve(a, b)


def eigh(xp, a):
    return xp.linalg.eigvalsh(a)


def _positive_definite(n, quick_n, rhs=0):
    """A well-conditioned symmetric positive definite matrix (1e6 elements at n = 1000), and
    `rhs` right-hand sides."""
    def make(rng, quick):
        m = quick_n if quick else n
        g = rng.standard_normal((m, m)) / np.sqrt(m)
        a = (g @ g.T + np.eye(m)).astype(np.float32)
        return (a, _normal(rng, m, rhs)) if rhs else (a,)
    return make


def add_one(xp, x):
    return x + 1


def center_in_place(xp, x):
    """Writes into its argument, as numpy code does: jitc copies the new values back in C."""
    x -= x.mean()
    return x.std()


# A global the function reads without receiving it: jitc reads it at each call (an implicit
# argument, found by a walk of the function's state); JAX and numba bake it in.
OFFSETS = np.linspace(-1, 1, 4, dtype=np.float32)


def add_global(xp, x):
    return x + OFFSETS


# Call forms beyond positional arrays: each returns a callable of the workload's arrays that
# calls a wrapped function in one form (keyword, default, static, *args, a dict of weights, a
# user's decorator, a method reading `self`).
def keyword_form(wrap, xp):
    f = wrap(lambda x, y: x + y)
    return lambda x, y: f(x, y=y)


def default_form(wrap, xp):
    def scaled(x, y, scale=2.0):
        return x * scale + y
    f = wrap(scaled)
    return lambda x, y: f(x, y)


def static_form(wrap, xp):
    def total(x, axis):
        return x.sum(axis=axis)
    f = wrap(total, static_argnames="axis")
    return lambda x, y: f(x, axis=0)


def varargs_form(wrap, xp):
    f = wrap(lambda *xs: xs[0] + xs[1])
    return lambda x, y: f(x, y)


def pytree_form(wrap, xp):
    f = wrap(lambda x, p: x * p["w"] + p["b"])
    return lambda x, y: f(x, {"w": y, "b": x})


def _logged(fun):
    def wrapper(*args, **kwargs):  # a user's decorator, without functools.wraps
        return fun(*args, **kwargs)
    return wrapper


def decorated_form(wrap, xp):
    f = wrap(_logged(lambda x, y: x + y))
    return lambda x, y: f(x, y)


class _Scale:
    def __init__(self, wrap, w):
        self.w = w
        self.apply = wrap(self._apply)

    def _apply(self, x):
        return x * self.w


def method_form(wrap, xp):
    holder: dict = {}

    def call(x, y):
        if "model" not in holder:
            holder["model"] = _Scale(wrap, y)
        return holder["model"].apply(x)
    return call


def fft(xp, x):
    return xp.fft.fft(x)


def rfft(xp, x):
    return xp.fft.rfft(x)


def _signal(complex_values: bool):
    """2**20 points (2**12 quick), complex128 or float64: numpy's FFT computes in double."""
    def make(rng, quick):
        n = 2**12 if quick else 2**20
        x = rng.standard_normal(n)
        return (x + 1j * rng.standard_normal(n) if complex_values else x,)
    return make


def _normal(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _elementwise_inputs(n):
    return lambda rng, quick: tuple(_normal(rng, n if not quick else min(n, 100_000))
                                    for _ in range(3))


def _square(n, quick_n):
    return lambda rng, quick: (_normal(rng, quick_n if quick else n, quick_n if quick else n),)


def _matmul_inputs(n):
    def make(rng, quick):
        m = min(n, 256) if quick else n
        return _normal(rng, m, m), _normal(rng, m, m)
    return make


def _matrix_vector(rows, columns, row=False):
    """A @ x (or, with `row`, x @ A) in float32: one output column (row)."""
    def make(rng, quick):
        scale = 8 if quick else 1
        a = _normal(rng, rows // scale, columns // scale)
        x = _normal(rng, (rows if row else columns) // scale)
        return (x, a) if row else (a, x)
    return make


def _int8_matmul_inputs(n):
    def make(rng, quick):
        m = min(n, 256) if quick else n
        return tuple(rng.integers(-128, 128, (m, m)).astype(np.int8) for _ in range(2))
    return make


def _rows(rng, quick):
    return (_normal(rng, 512 if quick else 4096, 1024),)


def _layernorm_inputs(rng, quick):
    return _rows(rng, quick) + (_normal(rng, 1024), _normal(rng, 1024))


def _mlp_inputs(rng, quick):
    return (_normal(rng, 64, 784), _normal(rng, 784, 512, scale=0.05), _normal(rng, 512),
            _normal(rng, 512, 512, scale=0.05), _normal(rng, 512), _normal(rng, 512, 10),
            _normal(rng, 10))


def _big_mlp_inputs(rng, quick):
    return (_normal(rng, 64 if quick else 256, 784), _normal(rng, 784, 1024, scale=0.05),
            _normal(rng, 1024, scale=0.1), _normal(rng, 1024, 1024, scale=0.03),
            _normal(rng, 1024, scale=0.1), _normal(rng, 1024, 10, scale=0.1),
            _normal(rng, 10, scale=0.1))


def _rnn_inputs(rng, quick):
    return (_normal(rng, 50, 32, 64), _normal(rng, 32, 128), _normal(rng, 64, 128, scale=0.1),
            _normal(rng, 128, 128, scale=0.1), _normal(rng, 128))


def _long_rnn_inputs(rng, quick):
    steps = 100 if quick else 1000
    return (_normal(rng, steps, 32, 64), _normal(rng, 32, 128), _normal(rng, 64, 128, scale=0.1),
            _normal(rng, 128, 128, scale=0.1), _normal(rng, 128))


_rnn_scan_inputs = _long_rnn_inputs  # the same 1000-step RNN, written with jitc.lax.scan


def _lstm_inputs(rng, quick):
    steps = 100 if quick else 1000
    return (_normal(rng, steps, 32, 64), _normal(rng, 32, 128), _normal(rng, 32, 128),
            _normal(rng, 192, 512, scale=0.1), _normal(rng, 512))


def _fill_inputs(rng, quick):
    return (_normal(rng, 200 if quick else 2000, 16),)


def _sample_inputs(rng, quick):
    # A contracting recurrence: with a larger w_hh the sampled sequence is chaotic, and even
    # numpy in float32 and float64 part ways after some 50 steps.
    hidden, vocab = 100, 65
    return (np.zeros((hidden, 1), np.float32), _normal(rng, hidden, vocab, scale=0.5),
            _normal(rng, hidden, hidden, scale=0.05), _normal(rng, vocab, hidden, scale=0.5),
            np.zeros(30 if quick else 300, np.float32))


def _gpt2_inputs(rng, quick):
    d, s = 768, 64
    return (_normal(rng, s, d), 1 + _normal(rng, d, scale=0.1), _normal(rng, d, scale=0.1),
            _normal(rng, d, 3 * d, scale=0.02), _normal(rng, 3 * d, scale=0.02),
            _normal(rng, d, d, scale=0.02), _normal(rng, d, scale=0.02),
            1 + _normal(rng, d, scale=0.1), _normal(rng, d, scale=0.1),
            _normal(rng, d, 4 * d, scale=0.02), _normal(rng, 4 * d, scale=0.02),
            _normal(rng, 4 * d, d, scale=0.02), _normal(rng, d, scale=0.02))


def gpt2_forward(xp, x, blocks):
    """A stack of GPT-2 blocks (12 of GPT-2 small's size in CACHE_WORKLOADS)."""
    for block in blocks:
        x = gpt2_block(xp, x, *block)
    return x


def _gpt2_stack_inputs(layers):
    def make(rng, quick):
        x, *block = _gpt2_inputs(rng, quick)
        # The layers share one set of weights: the program (and its compile) is the same as
        # with twelve, the inputs take 12 times less memory.
        return x, [tuple(block)] * layers
    return make


def sort(xp, x):
    return xp.sort(x)


def argsort(xp, x):
    # the values in argsort's order: numpy leaves the order of ties open, this is the same
    # for every valid answer
    return x[xp.argsort(x)]


def median(xp, x):
    return xp.median(x)


def histogram(xp, x):
    # range= given: without it jitc refuses (the edges would come from the traced min and max)
    return xp.histogram(x, bins=64, range=(-4.0, 4.0))[0]


def _vector(n):
    def make(rng, quick):
        return (_normal(rng, n // 100 if quick else n),)
    return make


WORKLOADS = [
    Workload("elementwise 1e3", elementwise, _elementwise_inputs(1_000), "elementwise"),
    Workload("elementwise 1e5", elementwise, _elementwise_inputs(100_000), "elementwise"),
    Workload("elementwise 1e7", elementwise, _elementwise_inputs(10_000_000), "elementwise"),
    Workload("gelu 4096x4096", gelu, _square(4096, 512), "fusion"),
    Workload("softmax 4096x1024", softmax, _rows, "fusion"),
    Workload("layernorm 4096x1024", layernorm, _layernorm_inputs, "fusion"),
    Workload("sum all 8192^2", sum_all, _square(8192, 1024), "reduction"),
    Workload("sum axis 0 8192^2", sum_axis0, _square(8192, 1024), "reduction"),
    Workload("sum axis 1 8192^2", sum_axis1, _square(8192, 1024), "reduction"),
    Workload("matmul 256", matmul, _matmul_inputs(256), "matmul"),
    Workload("matmul 512", matmul, _matmul_inputs(512), "matmul"),
    Workload("matmul 1024", matmul, _matmul_inputs(1024), "matmul"),
    Workload("matmul 2048", matmul, _matmul_inputs(2048), "matmul"),
    Workload("matrix-vector 4096x1024", matmul, _matrix_vector(4096, 1024), "matmul"),
    Workload("vector-matrix 1024x4096", matmul, _matrix_vector(1024, 4096, row=True),
             "matmul"),
    # Beside "matmul 1024" (float32) with --only "matmul 1024".
    Workload("int8 matmul 1024", int8_matmul, _int8_matmul_inputs(1024), "matmul"),
    Workload("sort 1e6", sort, _vector(1_000_000), "sorting"),
    Workload("argsort 1e6", argsort, _vector(1_000_000), "sorting"),
    Workload("median 1e6", median, _vector(1_000_000), "sorting"),
    Workload("histogram 1e6 (64 bins)", histogram, _vector(1_000_000), "sorting"),
    Workload("cholesky 1000", cholesky, _positive_definite(1000, 128), "linalg"),
    Workload("solve 1000 (16 rhs)", solve, _positive_definite(1000, 128, rhs=16), "linalg"),
    Workload("eigvalsh 200", eigh, _positive_definite(200, 64), "linalg"),
    Workload("MLP 784-512-512-10", mlp, _mlp_inputs, "model"),
    # jitc.quant beside the same model in float32: --only "MLP 784-1024" (bench/quant_speed.py
    # measures the pair interleaved, with top-1 agreement).
    Workload("MLP 784-1024-1024-10", mlp_logits, _big_mlp_inputs, "model"),
    Workload("int8 MLP 784-1024-1024-10 (jitc.quant)", mlp_logits, _big_mlp_inputs, "model",
             form=quantized_form(mlp_logits, ("w1", "w2", "w3"))),
    Workload("RNN 50 steps", rnn, _rnn_inputs, "model"),
    Workload("RNN scan 1000 steps", rnn_scan, _rnn_scan_inputs, "model"),
    Workload("GPT-2 block", gpt2_block, _gpt2_inputs, "model"),
    Workload("int8 GPT-2 block (jitc.quant)", gpt2_block, _gpt2_inputs, "model",
             form=quantized_form(gpt2_block, ("w_qkv", "w_o", "w_fc", "w_pr"))),
    Workload("GPT-2 12 layers", gpt2_forward, _gpt2_stack_inputs(12), "model"),
    Workload("GPT-2 decode step (KV cache 12x256x64)", gpt2_decode, _gpt2_decode_inputs,
             "model"),
    Workload("GPT-2 12 layers, c backend", gpt2_forward, _gpt2_stack_inputs(12), "model",
             backend="c"),
    # Its PTX for a GPU: trace, optimize and emit, nothing runs (the first-call column).
    Workload("cuda PTX, GPT-2 x12", gpt2_forward, _gpt2_stack_inputs(12), COMPILE_ONLY,
             backend="cuda"),
    Workload("fft complex128 2^20", fft, _signal(True), "fft"),
    Workload("rfft float64 2^20", rfft, _signal(False), "fft"),
    # Python loops that tracing unrolls: the first call (compile time) is the figure here.
    Workload("compile fill 2000 rows", fill_rows, _fill_inputs, "compile"),
    Workload("compile RNN 1000 steps", rnn, _long_rnn_inputs, "compile"),
    Workload("compile LSTM 1000 steps", lstm, _lstm_inputs, "compile"),
    Workload("compile sampler 300 steps", sample_chars, _sample_inputs, "compile"),
    Workload("dispatch x+1 (4)", add_one, lambda rng, quick: (_normal(rng, 4),), "dispatch"),
    Workload("dispatch x -= x.mean() (4)", center_in_place, lambda rng, quick: (_normal(rng, 4),),
             "dispatch"),
    Workload("dispatch x + global (4)", add_global, lambda rng, quick: (_normal(rng, 4),),
             "dispatch"),
    *(Workload(f"dispatch {label} (4)", add_one, lambda rng, quick: (_normal(rng, 4),
                                                                     _normal(rng, 4)),
               "dispatch", form=form)
      for label, form in [("f(x, y=y)", keyword_form), ("default arg", default_form),
                          ("static arg", static_form), ("*args", varargs_form),
                          ("dict of weights", pytree_form), ("decorated", decorated_form),
                          ("method self.w", method_form)]),
]


# The compile-cache benchmark (bench/cache_speed.py): first calls, cold and from the cache.
CACHE_WORKLOADS = [
    Workload("GPT-2 block", gpt2_block, _gpt2_inputs, "model"),
    Workload("GPT-2 12 layers", gpt2_forward, _gpt2_stack_inputs(12), "model"),
]
