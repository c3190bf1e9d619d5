"""NVML through ctypes (libnvidia-ml.so.1), for the agent. Stdlib only, Python 3.6+.

Symbols and structs follow NVIDIA's NVML API reference: nvmlInit_v2,
nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName,
nvmlDeviceGetUUID, nvmlDeviceGetCudaComputeCapability, nvmlDeviceGetMemoryInfo
(nvmlMemory_t = {unsigned long long total, free, used}), nvmlSystemGetDriverVersion.
Inside a container NVML cannot map its own PIDs, so only device-level figures are used;
the harness runs one cell per GPU so the device figure is the cell's.
"""
import ctypes

NVML_SUCCESS = 0


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Nvml(object):
    """Device-level NVML readings; `available` is False with `reason` when absent."""

    def __init__(self, libname="libnvidia-ml.so.1"):
        self.available = False
        self.reason = None
        self.handles = []
        self._lib = None
        try:
            lib = ctypes.CDLL(libname)
        except OSError as exc:
            self.reason = "no %s (%s)" % (libname, exc)
            return
        try:
            rc = lib.nvmlInit_v2()
            if rc != NVML_SUCCESS:
                self.reason = "nvmlInit_v2 returned %d" % rc
                return
            count = ctypes.c_uint(0)
            rc = lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
            if rc != NVML_SUCCESS:
                self.reason = "nvmlDeviceGetCount_v2 returned %d" % rc
                return
            for i in range(count.value):
                handle = ctypes.c_void_p()
                if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i),
                                                     ctypes.byref(handle)) == NVML_SUCCESS:
                    self.handles.append(handle)
        except AttributeError as exc:
            self.reason = "NVML symbol missing: %s" % exc
            return
        self._lib = lib
        self.available = True

    def _text(self, func, *args):
        buf = ctypes.create_string_buffer(96)
        if func(*(args + (buf, ctypes.c_uint(96)))) != NVML_SUCCESS:
            return None
        return buf.value.decode("utf-8", "replace")

    def devices(self):
        """[{index, name, uuid, cc: [major, minor], memory_total}], plus driver version."""
        out = []
        if not self.available:
            return out
        lib = self._lib
        for i, h in enumerate(self.handles):
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            cc = None
            if lib.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(major),
                                                      ctypes.byref(minor)) == NVML_SUCCESS:
                cc = [major.value, minor.value]
            mem = self.memory(i)
            out.append({"index": i, "name": self._text(lib.nvmlDeviceGetName, h),
                        "uuid": self._text(lib.nvmlDeviceGetUUID, h), "cc": cc,
                        "memory_total": mem[0] if mem else None})
        return out

    def driver(self):
        if not self.available:
            return None
        return self._text(self._lib.nvmlSystemGetDriverVersion)

    def memory(self, index):
        """(total, used) bytes of device `index`, or None."""
        if not self.available or index >= len(self.handles):
            return None
        mem = _Memory()
        if self._lib.nvmlDeviceGetMemoryInfo(self.handles[index],
                                             ctypes.byref(mem)) != NVML_SUCCESS:
            return None
        return (mem.total, mem.used)

    def used(self):
        """Bytes used summed over the visible devices, or None."""
        if not self.available or not self.handles:
            return None
        total = 0
        for i in range(len(self.handles)):
            m = self.memory(i)
            if m is None:
                return None
            total += m[1]
        return total
