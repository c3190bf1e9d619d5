#!/bin/bash
# NGC's entrypoint pattern (stand-in): a banner, a driver check, then exec the arguments.
# Like NGC's, the banner goes to stdout (harness reads samples from a file, not stdout).
{
    echo
    echo "================"
    echo "== TensorFlow =="
    echo "================"
    echo
    echo "NVIDIA Release ${NVIDIA_TENSORFLOW_VERSION:-?} (stand-in: CPU TensorFlow ${TENSORFLOW_VERSION:-?}, CUDA_VERSION=${CUDA_VERSION:-?} in name only)"
    echo "TensorFlow Version ${TENSORFLOW_VERSION:-?}"
    echo
    if ! ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 >/dev/null 2>&1; then
        echo "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available."
        echo "   Use the NVIDIA Container Toolkit to start this container with GPU support."
        echo
    fi
}
if [ "$#" -eq 0 ]; then set -- /bin/bash; fi
exec "$@"
