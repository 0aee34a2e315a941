"""Option types oslo.config lacks."""

import math

from oslo_config import cfg
from oslo_config import types


class FiniteFloat(types.Float):
    """A float within ``[min, max]`` that is neither NaN nor infinite.

    ``types.Float`` takes ``nan`` (it compares false with every bound) and,
    without a ``max``, ``inf``.
    """

    def __call__(self, value):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None  # the base class says what is wrong with it
        if number is not None and not math.isfinite(number):
            raise ValueError("should be a finite number, not %s" % number)
        return super().__call__(value)

    def __repr__(self):
        return "FiniteFloat(min=%r, max=%r)" % (self.min, self.max)


class FiniteFloatOpt(cfg.Opt):
    """A ``FloatOpt`` whose values must be finite numbers."""

    def __init__(self, name, min=None, max=None, **kwargs):
        super().__init__(name, type=FiniteFloat(min=min, max=max), **kwargs)
