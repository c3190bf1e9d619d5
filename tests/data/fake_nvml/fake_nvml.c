/* A small fake libnvidia-ml.so.1 for tests: the real NVML symbol names, signatures,
 * return codes and structs (nvml.h of the NVML API reference), with devices made up
 * from environment variables, so the harness's ctypes and pynvml paths are exercised
 * exactly as on a GPU host, without one.
 *
 *   FAKE_NVML_DEVICES  "NAME:CC:TOTAL[:USED];..."   e.g.
 *                      "NVIDIA GeForce RTX 4090:8.9:24564MiB:312MiB;NVIDIA GeForce RTX 3090:8.6:24576MiB"
 *                      sizes take B/KiB/MiB/GiB; default one RTX 4090.
 *   FAKE_NVML_DRIVER   driver version string, default "535.129.03"
 *   FAKE_NVML_CUDA     CUDA driver version as NVML encodes it (1000*major + 10*minor),
 *                      default 12020 (12.2)
 *   FAKE_NVML_INIT_ERROR  nvmlInit* returns this nvmlReturn_t (e.g. 9 DRIVER_NOT_LOADED)
 *   FAKE_NVML_LEAK     bytes added to every device's `used` on each
 *                      nvmlDeviceGetMemoryInfo call (a simulated GPU memory leak)
 *
 * Profile mode (the simulated GPU host, images/gpu-sim): when the file FAKE_NVML_PROFILE
 * (default /run/nvidia-sim/profile, written into the container by the fake
 * nvidia-container-runtime-hook) exists, it replaces FAKE_NVML_DEVICES/DRIVER/CUDA:
 *     driver 525.147.05
 *     cuda 12000
 *     state /run/nvidia-sim
 *     gpu <uuid> <cc major.minor> <total bytes> <reserved bytes> <used bytes> <name...>
 * one `gpu` line per GPU the container may see, in NVML index order. A device's `used`
 * is its profile figure plus the decimal number in <state>/<uuid>.used when that file
 * exists, re-read on every memory query: a scenario raises it to simulate device
 * allocations (a GPU memory leak visible end to end).
 * Memory as current drivers (R510+) report it: nvmlDeviceGetMemoryInfo (v1) counts the
 * driver-reserved memory as used; nvmlDeviceGetMemoryInfo_v2 reports it apart.
 *
 * What the device is doing (nvmlDeviceGetUtilizationRates, nvmlDeviceGetClockInfo,
 * nvmlDeviceGetCurrentClocksEventReasons and its older name ...ThrottleReasons), the
 * same for every device:
 *   FAKE_NVML_ACTIVITY  "UTIL:SM_MHZ:REASONS"   e.g. "100:1410:0x4" (a busy GPU held
 *                       down by its power cap); default "0:375:0x1" (idle, as an idle
 *                       H100 answers). Re-read on every call, so a test can change it.
 *   FAKE_NVML_ACTIVITY_FILE  a file holding the same text, re-read on every call (a
 *                       scenario writes it to change what the device does mid-run);
 *                       it wins over FAKE_NVML_ACTIVITY while it exists.
 *   FAKE_NVML_ACTIVITY_ERROR  these calls return this nvmlReturn_t (e.g. 3
 *                       NOT_SUPPORTED, as some GPUs answer for utilization).
 * Profile mode reads <state>/activity the same way.
 *
 * Build: gcc -shared -fPIC -o libnvidia-ml.so.1 fake_nvml.c
 *   -DFAKE_NVML_NO_ACTIVITY: an old library without those three functions;
 *   -DFAKE_NVML_THROTTLE_ONLY: a driver before R535 (ClocksThrottleReasons only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;                 /* an enum in nvml.h: int-sized */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_UNKNOWN 999

#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

typedef struct {                          /* nvmlMemory_t (v1) */
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {                          /* nvmlMemory_v2_t */
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24)))

#define MAX_DEVICES 16
#define TEXT 96                           /* NVML_DEVICE_NAME_V2_BUFFER_SIZE, UUID too */

struct nvmlDevice_st {
    char name[TEXT];
    char uuid[TEXT];
    int major, minor;
    unsigned long long total, used, reserved;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

static struct nvmlDevice_st devices[MAX_DEVICES];
static unsigned int device_count;
static int initialised;                   /* a reference count, as NVML keeps */
static unsigned long long leak;
static char driver_version[TEXT] = "535.129.03";
static int cuda_version = 12020;
static char state_dir[512];

static const char *profile_path(void) {
    const char *p = getenv("FAKE_NVML_PROFILE");
    return p && *p ? p : "/run/nvidia-sim/profile";
}

/* 1 when a profile file was read (it then replaces the environment variables). */
static int load_profile(void) {
    FILE *f = fopen(profile_path(), "r");
    char line[1024];
    if (f == NULL) return 0;
    device_count = 0;
    state_dir[0] = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char key[16];
        int used_chars = 0;
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "%15s %n", key, &used_chars) != 1) continue;
        if (strcmp(key, "driver") == 0) {
            snprintf(driver_version, TEXT, "%s", line + used_chars);
        } else if (strcmp(key, "cuda") == 0) {
            cuda_version = atoi(line + used_chars);
        } else if (strcmp(key, "state") == 0) {
            snprintf(state_dir, sizeof state_dir, "%s", line + used_chars);
        } else if (strcmp(key, "gpu") == 0 && device_count < MAX_DEVICES) {
            struct nvmlDevice_st *d = &devices[device_count];
            int name_at = 0;
            if (sscanf(line + used_chars, "%95s %d.%d %llu %llu %llu %n", d->uuid, &d->major,
                       &d->minor, &d->total, &d->reserved, &d->used, &name_at) < 6)
                continue;
            snprintf(d->name, TEXT, "%s", line + used_chars + name_at);
            device_count++;
        }
    }
    fclose(f);
    return 1;
}

/* Bytes a scenario "allocated" on the device: <state>/<uuid>.used, 0 when absent. */
static unsigned long long allocated(const struct nvmlDevice_st *d) {
    char path[700];
    FILE *f;
    unsigned long long v = 0;
    if (!state_dir[0]) return 0;
    snprintf(path, sizeof path, "%s/%s.used", state_dir, d->uuid);
    f = fopen(path, "r");
    if (f == NULL) return 0;
    if (fscanf(f, "%llu", &v) != 1) v = 0;
    fclose(f);
    return v;
}

static unsigned long long parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (strncmp(end, "GiB", 3) == 0) v *= 1024.0 * 1024.0 * 1024.0;
    else if (strncmp(end, "MiB", 3) == 0) v *= 1024.0 * 1024.0;
    else if (strncmp(end, "KiB", 3) == 0) v *= 1024.0;
    return (unsigned long long)v;
}

static void load_devices(void) {
    const char *spec = getenv("FAKE_NVML_DEVICES");
    const char *leak_text = getenv("FAKE_NVML_LEAK");
    char buf[4096];
    char *save = NULL, *item;
    const char *drv = getenv("FAKE_NVML_DRIVER");
    const char *cuda = getenv("FAKE_NVML_CUDA");
    device_count = 0;
    leak = leak_text ? strtoull(leak_text, NULL, 10) : 0;
    if (drv && *drv) snprintf(driver_version, TEXT, "%s", drv);
    if (cuda && *cuda) cuda_version = atoi(cuda);
    if (load_profile()) return;
    snprintf(buf, sizeof buf, "%s",
             spec && *spec ? spec : "NVIDIA GeForce RTX 4090:8.9:24564MiB:312MiB");
    for (item = strtok_r(buf, ";", &save); item && device_count < MAX_DEVICES;
         item = strtok_r(NULL, ";", &save)) {
        struct nvmlDevice_st *d = &devices[device_count];
        char *fields[4] = {0};
        char *f, *fsave = NULL;
        int n = 0;
        for (f = strtok_r(item, ":", &fsave); f && n < 4; f = strtok_r(NULL, ":", &fsave))
            fields[n++] = f;
        if (n < 3) continue;
        snprintf(d->name, TEXT, "%s", fields[0]);
        if (sscanf(fields[1], "%d.%d", &d->major, &d->minor) != 2) continue;
        d->total = parse_size(fields[2]);
        d->used = n > 3 ? parse_size(fields[3]) : 300ULL * 1024 * 1024;
        snprintf(d->uuid, TEXT, "GPU-fa4e0000-0000-4000-8000-%012u", device_count);
        d->reserved = 0;
        device_count++;
    }
}

static nvmlReturn_t copy_text(const char *text, char *out, unsigned int length) {
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t check_device(nvmlDevice_t device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (device < devices || device >= devices + device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    const char *fail = getenv("FAKE_NVML_INIT_ERROR");
    (void)flags;
    if (fail && *fail) return (nvmlReturn_t)atoi(fail);
    if (initialised++ == 0) load_devices();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    return copy_text(driver_version, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    if (cudaDriverVersion == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= device_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    unsigned int i;
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (uuid == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < device_count; i++) {
        if (strcmp(devices[i].uuid, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) return rc;
    *index = (unsigned int)(device - devices);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    nvmlReturn_t rc = check_device(device);
    return rc != NVML_SUCCESS ? rc : copy_text(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    nvmlReturn_t rc = check_device(device);
    return rc != NVML_SUCCESS ? rc : copy_text(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) return rc;
    if (major == NULL || minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *major = device->major;
    *minor = device->minor;
    return NVML_SUCCESS;
}

/* used (apart from reserved) now: the profile's figure, the scenario's allocations, the
 * FAKE_NVML_LEAK growth; capped at what is left after the reservation. */
static unsigned long long used_now(struct nvmlDevice_st *device) {
    unsigned long long used = __atomic_add_fetch(&device->used, leak, __ATOMIC_SEQ_CST);
    used += allocated(device);
    if (used + device->reserved > device->total) used = device->total - device->reserved;
    return used;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    nvmlReturn_t rc = check_device(device);
    unsigned long long used;
    if (rc != NVML_SUCCESS) return rc;
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    /* The agent reads from two threads: grow atomically. v1 counts reserved as used. */
    used = used_now(device) + device->reserved;
    memory->total = device->total;
    memory->used = used;
    memory->free = device->total - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    nvmlReturn_t rc = check_device(device);
    unsigned long long used;
    if (rc != NVML_SUCCESS) return rc;
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    used = used_now(device);
    memory->total = device->total;
    memory->reserved = device->reserved;
    memory->used = used;
    memory->free = device->total - device->reserved - used;
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_ACTIVITY
typedef struct {                          /* nvmlUtilization_t */
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;
#define NVML_CLOCK_SM 1

/* The device's utilization, SM clock and clock-event reasons now (see the top). */
static nvmlReturn_t activity(nvmlDevice_t device, unsigned int *util, unsigned int *mhz,
                             unsigned long long *reasons) {
    nvmlReturn_t rc = check_device(device);
    const char *fail = getenv("FAKE_NVML_ACTIVITY_ERROR");
    const char *env = getenv("FAKE_NVML_ACTIVITY");
    const char *path = getenv("FAKE_NVML_ACTIVITY_FILE");
    char text[128] = "0:375:0x1", state_path[600];
    FILE *f = NULL;
    if (rc != NVML_SUCCESS) return rc;
    if (fail && *fail) return (nvmlReturn_t)atoi(fail);
    if (env && *env) snprintf(text, sizeof text, "%s", env);
    if (state_dir[0]) {
        snprintf(state_path, sizeof state_path, "%s/activity", state_dir);
        f = fopen(state_path, "r");
    }
    if (f == NULL && path && *path) f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(text, sizeof text, f) == NULL) text[0] = 0;
        fclose(f);
    }
    *util = 0;
    *mhz = 0;
    *reasons = 0;
    if (sscanf(text, "%u:%u:%lli", util, mhz, reasons) < 2) return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    unsigned int util, mhz;
    unsigned long long reasons;
    nvmlReturn_t rc;
    if (utilization == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    rc = activity(device, &util, &mhz, &reasons);
    if (rc != NVML_SUCCESS) return rc;
    utilization->gpu = util;
    utilization->memory = util / 2;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    unsigned int util, mhz;
    unsigned long long reasons;
    nvmlReturn_t rc;
    if (clock == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    rc = activity(device, &util, &mhz, &reasons);
    if (rc != NVML_SUCCESS) return rc;
    *clock = type == NVML_CLOCK_SM ? mhz : 1593;   /* other clocks: an HBM3 memory clock */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons) {
    unsigned int util, mhz;
    if (clocksThrottleReasons == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return activity(device, &util, &mhz, clocksThrottleReasons);
}

#ifndef FAKE_NVML_THROTTLE_ONLY
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons) {
    return nvmlDeviceGetCurrentClocksThrottleReasons(device, clocksEventReasons);
}
#endif
#endif
