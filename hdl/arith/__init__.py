"""Floating-point units with the numerics of SPEC section 3: bf16 x bf16 -> fp32
multiplier, fp32 adder, fp32 multiplier, divider, square root, reciprocal and
reciprocal square root, exp, and fp32 -> bf16 converter, as clock-enabled cores
and as streamed units."""

from .bf16_multiplier import BF16MulCore, BF16Multiplier
from .float_ops import BF16, FP32
from .fp32_adder import FP32AddCore, FP32Adder
from .fp32_divider import FP32DivCore, FP32Divider
from .fp32_exp import FP32Exp, FP32ExpCore
from .fp32_multiplier import FP32MulCore, FP32Multiplier
from .fp32_reciprocal import FP32Rcp, FP32RcpCore
from .fp32_rsqrt import FP32Rsqrt, FP32RsqrtCore
from .fp32_sqrt import FP32Sqrt, FP32SqrtCore
from .fp32_to_bf16 import FP32ToBF16, FP32ToBF16Core
from ..lib.params import NUMERICS, check_numerics

__all__ = ["BF16MulCore", "BF16Multiplier", "FP32AddCore", "FP32Adder", "FP32DivCore",
           "FP32Divider", "FP32Exp", "FP32ExpCore", "FP32MulCore", "FP32Multiplier", "FP32Rcp",
           "FP32RcpCore",
           "FP32Rsqrt", "FP32RsqrtCore", "FP32Sqrt", "FP32SqrtCore",
           "FP32ToBF16", "FP32ToBF16Core", "BF16", "FP32", "NUMERICS", "check_numerics"]
