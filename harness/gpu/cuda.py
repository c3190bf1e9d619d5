"""Whether an image's CUDA can run on a GPU, decided before the run (NVIDIA's
compatibility tables, the image's CUDA version), and the log signs of an image that
cannot use the GPU (`LOG_SIGNS`), read by `analysis.outcomes`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.gpu.host import Gpu, Version

# First CUDA toolkit whose nvcc targets each compute capability natively (sm_XY), from
# the CUDA release notes and NVIDIA's per-architecture guides (Ada and Hopper: 11.8).
MIN_CUDA_FOR_CC: dict[Version, Version] = {
    (6, 0): (8, 0), (6, 1): (8, 0), (7, 0): (9, 0), (7, 5): (10, 0), (8, 0): (11, 0),
    (8, 6): (11, 1), (8, 7): (11, 4), (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8),
    (10, 1): (12, 8), (10, 3): (12, 9), (12, 0): (12, 8), (12, 1): (12, 9),
}
# First CUDA toolkit that no longer targets a compute capability (11.0: Kepler sm_30,
# 12.0: sm_35/37, 13.0: Maxwell to Volta).
DROPPED_IN: list[tuple[Version, Version, Version]] = [  # (cc from, cc to, CUDA)
    ((3, 0), (3, 2), (11, 0)), ((3, 5), (3, 7), (12, 0)), ((5, 0), (7, 2), (13, 0)),
]
ARCH = {5: "Maxwell", 6: "Pascal", 7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell",
        11: "Blackwell", 12: "Blackwell"}
ARCH_EXCEPTIONS = {(7, 5): "Turing", (8, 9): "Ada"}  # same major, another architecture


def parse_cuda_version(text: str | None) -> Version | None:
    """`11.1.1.017` / `11.8` / `cuda>=12.0 brand=tesla` -> (11, 1)."""
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def image_cuda(labels: Mapping[str, str] | None,
               env: Sequence[str] | Mapping[str, str] | None) -> Version | None:
    """The CUDA version an image was built with, from its config's `Env` (list or mapping)
    or labels, or None."""
    if isinstance(env, Mapping):
        variables = dict(env)
    else:
        variables = dict(item.partition("=")[::2] for item in env or ())
    labels = labels or {}
    for text in (variables.get("CUDA_VERSION"), labels.get("com.nvidia.cuda.version")):
        found = parse_cuda_version(text)
        if found is not None:
            return found
    m = re.search(r"cuda>=(\d+\.\d+)", variables.get("NVIDIA_REQUIRE_CUDA", ""))
    return parse_cuda_version(m.group(1)) if m else None


def _v(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def _arch(cc: Version) -> str:
    name = ARCH_EXCEPTIONS.get(cc, ARCH.get(cc[0]))
    return f"compute capability {_v(cc)}" + (f" ({name})" if name else "")


def precheck(cuda: Version | None, gpu: Gpu | Version | None,
             driver_cuda: Version | None = None) -> tuple[str, str] | None:
    """Can an image built with CUDA `cuda` run on `gpu`? Returns ("not-applicable" |
    "degraded" | "unsupported", reason) or None (native, or too little known).
    "unsupported": NVIDIA does not support it but it may run: run and decide from evidence.
    """
    cc = gpu.cc if isinstance(gpu, Gpu) else gpu
    if cuda is None or cc is None:
        return None
    for low, high, dropped in DROPPED_IN:
        if low <= cc <= high and cuda >= dropped:
            return ("not-applicable", f"CUDA {_v(dropped)} removed {_arch(cc)}; the image "
                    f"has CUDA {_v(cuda)}: run it on a newer GPU")
    if driver_cuda is not None and cuda[0] > driver_cuda[0]:
        return ("not-applicable", f"the image needs CUDA {_v(cuda)} but the driver supports "
                f"CUDA {_v(driver_cuda)}: upgrade the driver (forward-compatibility "
                "packages work on data-center GPUs only)")
    need = MIN_CUDA_FOR_CC.get(cc)
    if need is None and cc > max(MIN_CUDA_FOR_CC):
        newest = max(MIN_CUDA_FOR_CC)
        if cuda < MIN_CUDA_FOR_CC[newest]:
            need = MIN_CUDA_FOR_CC[newest]
        else:
            return ("degraded", f"PTX JIT: {_arch(cc)} is newer than any CUDA this harness "
                    f"knows; CUDA {_v(cuda)} can only JIT-compile PTX for it, if the image "
                    "ships PTX")
    if need is None:  # an unlisted older or embedded part: the nearest listed below
        known = [k for k in MIN_CUDA_FOR_CC if k <= cc]
        need = MIN_CUDA_FOR_CC[max(known)] if known else None
    if need is not None and cuda < need:
        # A cubin of the same major runs on a later minor, but older libraries
        # may not know the GPU: "unsupported" runs it with a short deadline.
        same_major = [k for k, v in MIN_CUDA_FOR_CC.items()
                      if k[0] == cc[0] and k < cc and v <= cuda]
        if same_major:
            older = max(same_major)
            return ("unsupported", f"CUDA {_v(cuda)} predates {_arch(cc)}, supported from "
                    f"CUDA {_v(need)}; its sm_{older[0]}{older[1]} binaries may still run "
                    f"on it (same major): run with a short deadline, decided from evidence")
        return ("not-applicable", f"CUDA {_v(cuda)} predates {_arch(cc)}, supported from "
                f"CUDA {_v(need)}: run this image on an older GPU (e.g. the RTX 3090 host) "
                "or use a newer image")
    if driver_cuda is not None and cuda > driver_cuda:
        return ("degraded", f"PTX JIT unavailable: the image's CUDA {_v(cuda)} is newer than "
                f"the driver's {_v(driver_cuda)} (minor-version compatibility runs native "
                "code only)")
    return None


def compatibility(cuda: Version | None, cc: Version | None) -> str | None:
    """A reason the image cannot run natively on the GPU, or None (kept for callers)."""
    found = precheck(cuda, cc)
    return found[1] if found else None


SignKind = Literal["not-applicable", "degraded"]


@dataclass(frozen=True, slots=True)
class LogSign:
    """A text CUDA or a framework prints when an image cannot use the GPU (or only via PTX
    JIT): meaning, case-insensitive pattern, and whether `after_run`
    (`runtime_incompatibility`) and/or `in_run` (`NOT_APPLICABLE_TEXT`) read it."""

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
