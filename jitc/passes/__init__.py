"""Module-to-module passes and the pipelines that run them."""

from jitc.passes.dce import dce
from jitc.passes.fusion import fusion
from jitc.passes.legalize_broadcast import legalize_broadcast
from jitc.passes.pipeline import Pass, Pipeline, module_pass, run_passes

# What the reference interpreter runs: the traced program with broadcasts made explicit.
DEFAULT_PASSES = (legalize_broadcast, dce)
# What code generators run: the same, then grouped into fused kernels.
KERNEL_PASSES = (legalize_broadcast, dce, fusion, dce)

__all__ = ["dce", "fusion", "KERNEL_PASSES", "legalize_broadcast", "Pass", "Pipeline",
           "module_pass", "run_passes", "DEFAULT_PASSES"]
