"""Post-training 8-bit quantization of float numpy functions (docs/quantization.md).

    q = jitc.quant.quantize(predict, calibration=[(x1,), (x2,)])
    y = q(x)                     # int8 products, float results
    print(q.report())            # against the float function
"""

from jitc.quant.observers import MinMax, Observer, Percentile
from jitc.quant.products import Product, QuantizedWeight
from jitc.quant.quantize import Quantized, quantize
from jitc.quant.report import Report
from jitc.quant.selection import Selection

__all__ = ["quantize", "Quantized", "Report", "Product", "QuantizedWeight", "Selection",
           "Observer", "MinMax", "Percentile"]
