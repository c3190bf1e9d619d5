"""What CUDA runtimes and frameworks print when an image cannot use the GPU (or only
through PTX JIT), and the after-run reading of a cell's log and first step with it.

`analysis/` reads these signs too (`NOT_APPLICABLE_TEXT` in the within-run verdict,
`runtime_incompatibility` in the decision), so this module needs nothing but `re`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# The framework's first step JIT-compiling every kernel from PTX takes minutes, not the
# seconds of graph building and autotuning a normal first step costs.
JIT_MIN_FIRST_S = 30.0
JIT_MIN_RATIO = 100.0

SignKind = Literal["not-applicable", "degraded"]


@dataclass(frozen=True, slots=True)
class LogSign:
    """A text CUDA or a framework prints when an image cannot use the GPU (or only
    through PTX JIT): what it means, its one pattern (read case-insensitively), and which
    of the two log readings read it.

    - `after_run`: `runtime_incompatibility`, after every run, searches the log and the
      traceback for each such sign, in table order; the first found gives (`kind`,
      `why`).
    - `in_run`: the within-run reading of how a run ended (`analysis.verdict`) searches
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
_AFTER_RUN = tuple((sign, re.compile(sign.pattern, re.IGNORECASE))
                   for sign in LOG_SIGNS if sign.after_run)
# The within-run reading's signs as one pattern: the reason is the text found.
NOT_APPLICABLE_TEXT = re.compile(
    "|".join(f"(?:{sign.pattern})" for sign in LOG_SIGNS
             if sign.in_run and sign.kind == "not-applicable"),
    re.IGNORECASE)


def runtime_incompatibility(first_step_s: float | None, median_step_s: float | None,
                            log_text: str = "", baseline_first_s: float | None = None
                            ) -> tuple[str, str] | None:
    """Incompatibility seen while running, when the image's labels did not say.

    The logs decide first (CUDA's and the frameworks' own error texts); otherwise a first
    iteration that took minutes and hundreds of times the median step means every
    kernel was JIT-compiled from PTX. `baseline_first_s` (the same image's first step on
    another GPU) makes that call sharper. Returns (verdict, reason) or None.
    """
    for sign, pattern in _AFTER_RUN:
        if pattern.search(log_text):
            return (sign.kind, sign.why)
    if first_step_s is None or not median_step_s or median_step_s <= 0:
        return None
    ratio = first_step_s / median_step_s
    slow_vs_other_gpu = (baseline_first_s is not None and first_step_s > 10 * baseline_first_s
                         and first_step_s > JIT_MIN_FIRST_S / 3)
    if (first_step_s >= JIT_MIN_FIRST_S and ratio >= JIT_MIN_RATIO) or slow_vs_other_gpu:
        return ("degraded", f"PTX JIT likely: the first iteration took {first_step_s:.0f} s, "
                f"{ratio:.0f}x the median step")
    return None
