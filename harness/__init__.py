"""harness: find which image, package version or GPU introduced a leak or a slowdown."""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from harness.api import Checked, Swept, check, sweep

__all__ = ["Checked", "Swept", "__version__", "check", "sweep"]

# The Python API (harness/api/) is imported on first use, so `import harness` stays cheap.
_API = ("Checked", "Swept", "check", "sweep")


def __getattr__(name: str) -> object:
    if name in _API:
        # lazy: `import harness` loads no module of its own (the API on first use)
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
