"""perftunereport: per-kernel GPU hardware-counter evidence, from ncu capture to a trusted data lake."""

__version__ = "0.1.0"
