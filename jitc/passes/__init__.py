"""Module-to-module passes and the pipelines that run them."""

from jitc.passes.dce import dce
from jitc.passes.legalize_broadcast import legalize_broadcast
from jitc.passes.pipeline import Pass, Pipeline, module_pass, run_passes

DEFAULT_PASSES = (legalize_broadcast, dce)

__all__ = ["dce", "legalize_broadcast", "Pass", "Pipeline", "module_pass", "run_passes",
           "DEFAULT_PASSES"]
