"""What CUDA runtimes and frameworks print when an image cannot use the GPU (or only
through PTX JIT). `analysis.outcomes` reads a cell's log with them (`NOT_APPLICABLE_TEXT`
in how the run ended, `AFTER_RUN` in `runtime_incompatibility`), so this module needs
nothing but `re`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SignKind = Literal["not-applicable", "degraded"]


@dataclass(frozen=True, slots=True)
class LogSign:
    """A text CUDA or a framework prints when an image cannot use the GPU (or only
    through PTX JIT): what it means, its one pattern (read case-insensitively), and which
    of the two log readings read it.

    - `after_run`: `runtime_incompatibility`, after every run, searches the log and the
      traceback for each such sign, in table order; the first found gives (`kind`,
      `why`).
    - `in_run`: the within-run reading of how a run ended (`analysis.decision`) searches
      for these as one pattern (`NOT_APPLICABLE_TEXT`); a run whose log has one is
      `not-applicable`, not a crash, and the text found is its reason.
    """

    kind: SignKind
    why: str
    pattern: str
    after_run: bool = True
    in_run: bool = False


# The one table of what CUDA runtimes and frameworks print when an image cannot use the
# GPU; not-applicable signs first (`runtime_incompatibility` takes the first one found).
LOG_SIGNS: tuple[LogSign, ...] = (
    LogSign("not-applicable", "no kernel image for this GPU (cudaErrorNoKernelImageForDevice)",
            r"no kernel image is available for execution|cudaErrorNoKernelImageForDevice",
            in_run=True),
    LogSign("not-applicable", "no binary for this GPU (CUDA_ERROR_NO_BINARY_FOR_GPU)",
            r"CUDA_ERROR_NO_BINARY_FOR_GPU", in_run=True),
    LogSign("not-applicable",
            "the driver is older than the image's CUDA runtime (cudaErrorInsufficientDriver)",
            r"CUDA driver version is insufficient", in_run=True),
    LogSign("not-applicable",
            "CUDA forward compatibility is not supported on this GPU (error 804)",
            r"forward compatibility was attempted on non supported HW"),
    LogSign("not-applicable", "the image's ptxas does not know this GPU",
            r"Value 'sm_\d+' is not defined for option 'gpu-name'"),
    LogSign("not-applicable", "PyTorch in the image was not built for this GPU",
            r"with CUDA capability sm_\d+ is not compatible with the current PyTorch"),
    LogSign("not-applicable", "cuBLAS in the image does not support this GPU",
            r"CUBLAS_STATUS_ARCH_MISMATCH"),
    LogSign("not-applicable",
            "the display driver and the CUDA driver do not match (error 803)",
            r"unsupported display driver / cuda driver combination", after_run=False,
            in_run=True),
    LogSign("not-applicable", "the framework needs a GPU of a higher compute capability",
            r"requires CUDA compute capability", after_run=False, in_run=True),
    LogSign("degraded", "PTX JIT: TensorFlow has no native kernels for this GPU",
            r"CUDA kernels will be jit-compiled from PTX"),
    LogSign("degraded", "PTX newer than the driver: kernels that need JIT fail",
            r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|PTX was compiled with an unsupported toolchain"),
)
# The after-run reading's signs, each compiled (`analysis.outcomes.runtime_incompatibility`).
AFTER_RUN = tuple((sign, re.compile(sign.pattern, re.IGNORECASE))
                   for sign in LOG_SIGNS if sign.after_run)
# The within-run reading's signs as one pattern: the reason is the text found.
NOT_APPLICABLE_TEXT = re.compile(
    "|".join(f"(?:{sign.pattern})" for sign in LOG_SIGNS
             if sign.in_run and sign.kind == "not-applicable"),
    re.IGNORECASE)
