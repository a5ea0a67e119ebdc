"""Module-to-module passes and the pipelines that run them."""

from jitc.passes.convolution_products import convolution_products
from jitc.passes.cse import cse
from jitc.passes.dce import dce
from jitc.passes.dot_merger import dot_merger
from jitc.passes.fold import fold
from jitc.passes.fusion import fusion, fusion_keeping_views
from jitc.passes.hoist_steps import hoist_steps
from jitc.passes.integer_dots import integer_dots
from jitc.passes.layout import (
    contractions_read_strided,
    features_minor,
    gemm_operand_layout,
    layout_assignment,
)
from jitc.passes.legalize_broadcast import legalize_broadcast
from jitc.passes.pipeline import FixedPoint, Pass, Pipeline, module_pass, run_passes
from jitc.passes.simplify import simplify
from jitc.passes.split_reductions import split_reductions

# Algebraic simplification, constant folding, CSE and DCE, repeated until nothing changes.
SIMPLIFICATION = FixedPoint("simplification", [simplify, fold, cse, dce], max_iterations=8)
# What the reference interpreter runs: the traced program, simplified, broadcasts explicit.
DEFAULT_PASSES = (hoist_steps, legalize_broadcast, SIMPLIFICATION, convolution_products,
                  integer_dots, dce)
# What code generators run: the same, then layouts chosen and ops grouped into fused kernels.
KERNEL_PASSES = (*DEFAULT_PASSES, split_reductions, dot_merger,
                 layout_assignment(contractions_read_strided, features_minor,
                                   copy_layout=gemm_operand_layout),
                 fusion_keeping_views, dce)

__all__ = ["cse", "dce", "dot_merger", "fold", "fusion", "hoist_steps",
           "convolution_products", "integer_dots",
           "layout_assignment", "legalize_broadcast", "simplify", "split_reductions",
           "FixedPoint", "Pass", "Pipeline", "module_pass", "run_passes", "SIMPLIFICATION",
           "DEFAULT_PASSES", "KERNEL_PASSES"]
