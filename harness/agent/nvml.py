"""NVML through ctypes (libnvidia-ml.so.1), for the agent. Stdlib only, Python 3.6+.

Symbols, signatures and structs follow NVIDIA's NVML API reference (nvml.h):
  nvmlReturn_t nvmlInit_v2(void);  nvmlReturn_t nvmlShutdown(void);
  const char *nvmlErrorString(nvmlReturn_t);
  nvmlDeviceGetCount_v2(unsigned int *);
  nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t *);
  nvmlDeviceGetName / nvmlDeviceGetUUID(nvmlDevice_t, char *, unsigned int);
  nvmlDeviceGetCudaComputeCapability(nvmlDevice_t, int *major, int *minor);
  nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *)
      with nvmlMemory_t = {unsigned long long total, free, used};
  nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t *)
      with nvmlMemory_v2_t = {unsigned int version; unsigned long long total, reserved,
      free, used} and version = sizeof(nvmlMemory_v2_t) | 2 << 24.
Since R510 drivers the v1 call counts the driver's reserved memory (a few hundred MiB
per GPU) as used, so an idle GPU looks held; `_v2` reports it apart and is used when the
library has it.
  nvmlSystemGetDriverVersion(char *, unsigned int);
  nvmlSystemGetCudaDriverVersion_v2(int *)   (1000 * major + 10 * minor).
What the device is doing (read per sample by `activity`; each optional, skipped where a
driver lacks it or answers NOT_SUPPORTED, never fatal):
  nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t *)
      with nvmlUtilization_t = {unsigned int gpu, memory} (percent of the driver's last
      sample period, 1/6 s to 1 s by product, in which a kernel ran);
  nvmlDeviceGetClockInfo(nvmlDevice_t, nvmlClockType_t, unsigned int *)  (MHz;
      NVML_CLOCK_SM = 1);
  nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t, unsigned long long *)  (R535+;
      older drivers name it nvmlDeviceGetCurrentClocksThrottleReasons: same bits, 0x1
      GPU idle, 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal,
      0x80 HW power brake).
HARNESS_NVML_DEVICES (comma-separated NVML indices or UUIDs) restricts the readings to
the cell's GPUs where nothing else does (the local runtime: no container, every GPU of
the host is visible to NVML). nvmlDevice_t is an opaque pointer, kept as c_void_p. Inside a container NVML cannot map
its own PIDs (the PID namespace differs), so only device-level figures are used; the
harness runs one cell per GPU so that the device's figure is the cell's.

`python nvml.py [LIB]` prints the summary as JSON (a probe for `harness doctor`).
"""
import ctypes
import json
import os
import sys

NVML_SUCCESS = 0
TEXT_SIZE = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE == NVML_DEVICE_UUID_V2_BUFFER_SIZE


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class _MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


MEMORY_V2 = ctypes.sizeof(_MemoryV2) | (2 << 24)  # NVML_STRUCT_VERSION(Memory, 2)


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


NVML_CLOCK_SM = 1
# The sample fields `activity` fills (the host's list: harness.protocol.ingest).
ACTIVITY_FIELDS = ("gpu_util", "sm_mhz", "clk_reasons")

_P = ctypes.POINTER
_SIGNATURES = {
    "nvmlInit_v2": [],
    "nvmlShutdown": [],
    "nvmlDeviceGetCount_v2": [_P(ctypes.c_uint)],
    "nvmlDeviceGetHandleByIndex_v2": [ctypes.c_uint, _P(ctypes.c_void_p)],
    "nvmlDeviceGetName": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint],
    "nvmlDeviceGetUUID": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint],
    "nvmlDeviceGetCudaComputeCapability": [ctypes.c_void_p, _P(ctypes.c_int),
                                           _P(ctypes.c_int)],
    "nvmlDeviceGetMemoryInfo": [ctypes.c_void_p, _P(_Memory)],
    "nvmlSystemGetDriverVersion": [ctypes.c_char_p, ctypes.c_uint],
}
_OPTIONAL = {
    "nvmlSystemGetCudaDriverVersion_v2": [_P(ctypes.c_int)],
    "nvmlErrorString": [ctypes.c_int],
    "nvmlDeviceGetMemoryInfo_v2": [ctypes.c_void_p, _P(_MemoryV2)],
    "nvmlDeviceGetUtilizationRates": [ctypes.c_void_p, _P(_Utilization)],
    "nvmlDeviceGetClockInfo": [ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_uint)],
    "nvmlDeviceGetCurrentClocksEventReasons": [ctypes.c_void_p, _P(ctypes.c_ulonglong)],
    "nvmlDeviceGetCurrentClocksThrottleReasons": [ctypes.c_void_p, _P(ctypes.c_ulonglong)],
}


class Nvml(object):
    """Device-level NVML readings; `available` is False with `reason` when absent."""

    def __init__(self, libname="libnvidia-ml.so.1"):
        self.available = False
        self.reason = None
        self.handles = []
        self.indices = []          # NVML index of each handle (a subset when restricted)
        self.memory_api = None
        self._lib = None
        self._fn = {}
        try:
            lib = ctypes.CDLL(libname)
        except OSError as exc:
            self.reason = "cannot load %s (%s): no NVIDIA driver in this container" % (
                libname, exc)
            return
        try:
            for name, argtypes in _SIGNATURES.items():
                self._fn[name] = self._bind(lib, name, argtypes, ctypes.c_int)
        except AttributeError as exc:
            self.reason = "NVML symbol missing in %s: %s" % (libname, exc)
            return
        for name, argtypes in _OPTIONAL.items():
            restype = ctypes.c_char_p if name == "nvmlErrorString" else ctypes.c_int
            try:
                self._fn[name] = self._bind(lib, name, argtypes, restype)
            except AttributeError:
                pass
        rc = self._fn["nvmlInit_v2"]()
        if rc != NVML_SUCCESS:
            self.reason = "nvmlInit_v2 failed: %s" % self.error(rc)
            return
        count = ctypes.c_uint(0)
        rc = self._fn["nvmlDeviceGetCount_v2"](ctypes.byref(count))
        if rc != NVML_SUCCESS:
            self.reason = "nvmlDeviceGetCount_v2 failed: %s" % self.error(rc)
            self._fn["nvmlShutdown"]()
            return
        only = [x.strip() for x in os.environ.get("HARNESS_NVML_DEVICES", "").split(",")
                if x.strip()]
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if self._fn["nvmlDeviceGetHandleByIndex_v2"](i, ctypes.byref(handle)) == 0:
                if only and str(i) not in only and \
                        self._text("nvmlDeviceGetUUID", handle) not in only:
                    continue
                self.handles.append(handle)
                self.indices.append(i)
        self._lib = lib
        self.available = True
        self.memory_api = "v2" if "nvmlDeviceGetMemoryInfo_v2" in self._fn else "v1"

    @staticmethod
    def _bind(lib, name, argtypes, restype):
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
        return fn

    def error(self, rc):
        """`Driver Not Loaded (9)`: NVML's own words for a return code."""
        fn = self._fn.get("nvmlErrorString")
        text = fn(rc) if fn is not None else None
        return "%s (%d)" % (text.decode("utf-8", "replace") if text else "error", rc)

    def _text(self, name, *args):
        buf = ctypes.create_string_buffer(TEXT_SIZE)
        if self._fn[name](*(args + (buf, TEXT_SIZE))) != NVML_SUCCESS:
            return None
        return buf.value.decode("utf-8", "replace")

    def devices(self):
        """[{index, name, uuid, cc: [major, minor], memory_total}] of the visible GPUs."""
        out = []
        if not self.available:
            return out
        for i, h in enumerate(self.handles):
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            cc = None
            if self._fn["nvmlDeviceGetCudaComputeCapability"](
                    h, ctypes.byref(major), ctypes.byref(minor)) == NVML_SUCCESS:
                cc = [major.value, minor.value]
            mem = self.memory_info(i)
            out.append({"index": self.indices[i], "name": self._text("nvmlDeviceGetName", h),
                        "uuid": self._text("nvmlDeviceGetUUID", h), "cc": cc,
                        "memory_total": mem["total"] if mem else None,
                        "memory_reserved": mem["reserved"] if mem else None,
                        "memory_used": mem["used"] if mem else None,
                        "memory_api": mem["api"] if mem else None})
        return out

    def driver(self):
        """The kernel driver's version string, e.g. "535.129.03", or None."""
        if not self.available:
            return None
        return self._text("nvmlSystemGetDriverVersion")

    def cuda_driver(self):
        """The newest CUDA version the driver supports, e.g. "12.2", or None."""
        fn = self._fn.get("nvmlSystemGetCudaDriverVersion_v2")
        if not self.available or fn is None:
            return None
        version = ctypes.c_int(0)
        if fn(ctypes.byref(version)) != NVML_SUCCESS:
            return None
        return "%d.%d" % (version.value // 1000, (version.value % 1000) // 10)

    def summary(self):
        """The header's `gpu` block: devices, driver and the driver's CUDA version."""
        return {"devices": self.devices(), "driver": self.driver(),
                "cuda_driver": self.cuda_driver()}

    def memory_info(self, index):
        """{total, used, reserved, api} bytes of the index-th visible device, or None.

        `_v2` first: `used` then excludes the driver's reservation (`reserved`); with
        only v1 (drivers before R510, or a library without `_v2`) `reserved` is None and
        `used` may include it.
        """
        if not self.available or index >= len(self.handles):
            return None
        fn = self._fn.get("nvmlDeviceGetMemoryInfo_v2")
        if fn is not None:
            mem2 = _MemoryV2()
            mem2.version = MEMORY_V2
            if fn(self.handles[index], ctypes.byref(mem2)) == NVML_SUCCESS:
                return {"total": mem2.total, "used": mem2.used, "reserved": mem2.reserved,
                        "api": "v2"}
        mem = _Memory()
        if self._fn["nvmlDeviceGetMemoryInfo"](self.handles[index],
                                               ctypes.byref(mem)) != NVML_SUCCESS:
            return None
        return {"total": mem.total, "used": mem.used, "reserved": None, "api": "v1"}

    def memory(self, index):
        """(total, used) bytes of the index-th visible device, or None (used: v2 when
        available, i.e. without the driver's reservation)."""
        mem = self.memory_info(index)
        return (mem["total"], mem["used"]) if mem else None

    def used_by_device(self):
        """[used bytes or None] per visible device."""
        return [(m[1] if m else None) for m in map(self.memory, range(len(self.handles)))]

    def used(self):
        """Bytes used summed over the visible devices, or None."""
        if not self.available or not self.handles:
            return None
        per = self.used_by_device()
        return None if None in per else sum(per)

    def _ask(self, name, index, *args):
        """True when `name` answered for the index-th device; a function that fails
        (NOT_SUPPORTED on this GPU, a driver without it) is not asked again."""
        fn = self._fn.get(name)
        if fn is None:
            return False
        if fn(self.handles[index], *args) == NVML_SUCCESS:
            return True
        self._fn.pop(name, None)
        return False

    def activity(self):
        """What the visible devices did lately: {gpu_util: percent, sm_mhz: MHz,
        clk_reasons: bitmask}, each key present only where NVML answered.

        Over several devices: the highest utilization, the lowest SM clock and every
        reason seen (a cell normally has one GPU). Costs one NVML call per function and
        device (~10-50 us on a real GPU): the agent reads it at its step samples only.
        """
        out = {}
        if not self.available or not self.handles:
            return out
        util = _Utilization()
        clock = ctypes.c_uint(0)
        bits = ctypes.c_ulonglong(0)
        reasons = None
        for i in range(len(self.handles)):
            if self._ask("nvmlDeviceGetUtilizationRates", i, ctypes.byref(util)):
                out["gpu_util"] = max(out.get("gpu_util", 0), int(util.gpu))
            if self._ask("nvmlDeviceGetClockInfo", i, NVML_CLOCK_SM, ctypes.byref(clock)):
                mhz = int(clock.value)
                out["sm_mhz"] = min(out.get("sm_mhz", mhz), mhz)
            for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                         "nvmlDeviceGetCurrentClocksThrottleReasons"):
                if self._ask(name, i, ctypes.byref(bits)):
                    reasons = (reasons or 0) | int(bits.value)
                    break
        if reasons is not None:
            out["clk_reasons"] = reasons
        return out

    def close(self):
        if self.available:
            self._fn["nvmlShutdown"]()
            self.available = False


def main(argv):
    nvml = Nvml(argv[1] if len(argv) > 1 else "libnvidia-ml.so.1")
    out = nvml.summary() if nvml.available else {"reason": nvml.reason}
    nvml.close()
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    return 0 if "devices" in out else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
