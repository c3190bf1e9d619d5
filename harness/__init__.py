"""harness: find which image, package version or GPU introduced a leak or a slowdown."""

__version__ = "0.1.0"
