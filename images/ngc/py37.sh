#!/usr/bin/env bash
# Build the Python 3.7 / glibc 2.31 base of the NGC-like TF1 stand-in images:
# Debian bullseye (glibc 2.31, as Ubuntu 20.04 in NGC's TF1 images), debootstrapped and
# imported into the local engine, with this machine's pyenv Python 3.7 copied in and made
# to run on the older glibc (Debian has no Python 3.7 since buster):
#   - libpython3.7m.so.1.0 and bin/python3.7 are relinked inside the bullseye rootfs
#     (its gcc) from pyenv's own libpython3.7m.a and python.o;
#   - the extension modules' glibc version requirements newer than 2.31 are lowered to
#     GLIBC_2.2.5 by elf_glibc_compat.py (same functions, older version names);
#   - the result is checked by importing math, cmath, ctypes, multiprocessing in the chroot.
# Adds NGC's entrypoint pattern: /opt/nvidia/nvidia_entrypoint.sh prints a banner to
# stderr and execs its arguments.
# Usage: images/ngc/py37.sh [TAG]   (default harness-test/py37:bullseye)
# PY37: the pyenv 3.7 prefix (default ~/.pyenv/versions/3.7.16); MIRROR: the apt mirror
# (default: read from this machine's apt sources, see images/base/mirror.py --via).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TAG="${1:-harness-test/py37:bullseye}"
PY37="${PY37:-$HOME/.pyenv/versions/3.7.16}"
RECIPE_HASH="$(cat "$0" "$HERE/elf_glibc_compat.py" "$HERE/nvidia_entrypoint.sh" | sha256sum | cut -c1-16)"
if docker image inspect "$TAG" --format '{{index .Config.Labels "harness.recipe"}}' 2>/dev/null \
        | grep -qx "$RECIPE_HASH"; then
    echo "py37: $TAG is up to date (recipe $RECIPE_HASH)"
    exit 0
fi
# RECIPE_CHECK=1 (`harness images build --check`): say so, build nothing.
if [ "${RECIPE_CHECK:-}" = 1 ]; then echo "py37: $TAG is out of date"; exit 1; fi
if [ ! -f "$PY37/lib/python3.7/config-3.7m-x86_64-linux-gnu/libpython3.7m.a" ]; then
    echo "py37: no pyenv Python 3.7 build at $PY37 (need its libpython3.7m.a); set PY37" >&2
    exit 3
fi
MIRROR="${MIRROR:-$(python3 "$HERE/../base/mirror.py" bullseye --via bookworm)}"
ROOTFS="$(mktemp -d /tmp/harness-py37.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
echo "py37: debootstrap bullseye (gcc for the relink) ... (about two minutes)"
debootstrap --variant=minbase --include=gcc,libc6-dev,procps,libffi7,zlib1g,libbz2-1.0,liblzma5,libsqlite3-0 \
    bullseye "$ROOTFS" "$MIRROR" > "$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
echo "py37: copying $PY37 -> /usr/local and relinking against glibc $(chroot "$ROOTFS" ldd --version | head -1 | awk '{print $NF}')"
tar -C "$PY37" --exclude=lib/python3.7/test --exclude='__pycache__' --exclude=lib/python3.7/site-packages \
    -c . | tar -C "$ROOTFS/usr/local" -x
CFG=/usr/local/lib/python3.7/config-3.7m-x86_64-linux-gnu
chroot "$ROOTFS" /bin/sh -ec "
  cd $CFG
  rm -f /usr/local/lib/libpython3.7m.so*
  gcc -shared -o /usr/local/lib/libpython3.7m.so.1.0 -Wl,-soname,libpython3.7m.so.1.0 \
      -Wl,--whole-archive libpython3.7m.a -Wl,--no-whole-archive -lpthread -ldl -lutil -lm
  ln -sf libpython3.7m.so.1.0 /usr/local/lib/libpython3.7m.so
  gcc -o /usr/local/bin/python3.7 python.o -L/usr/local/lib -lpython3.7m -lpthread -ldl -lutil -lm
  ldconfig
  ln -sf python3.7 /usr/local/bin/python3
  ln -sf python3.7 /usr/local/bin/python"
python3 "$HERE/elf_glibc_compat.py" "$ROOTFS"/usr/local/lib/python3.7/lib-dynload/*.so
chroot "$ROOTFS" /usr/local/bin/python3 -c \
    'import math, cmath, ctypes, multiprocessing, json, zlib, bz2, lzma, sqlite3; print("py37: imports ok, hypot(3, 4) =", math.hypot(3, 4))'
# The standard library's .pyc (pyenv's own are left out above): without them every
# container compiled the modules it imported, ~165 for TensorFlow 1.15 (~0.4 s of CPU a
# container) and ~0.15 s for the agent alone, each time, as a container's writes are lost.
# (-x: what CPython's own `make install` leaves out, Python 2 test data among it)
chroot "$ROOTFS" /usr/local/bin/python3 -m compileall -q \
    -x 'bad_coding|badsyntax|lib2to3/tests/data' /usr/local/lib/python3.7 > /dev/null
mkdir -p "$ROOTFS/opt/nvidia"
install -m 0755 "$HERE/nvidia_entrypoint.sh" "$ROOTFS/opt/nvidia/nvidia_entrypoint.sh"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
echo "py37: docker import -> $TAG"
tar -C "$ROOTFS" -c . | docker import \
    --change "LABEL harness.recipe=$RECIPE_HASH" \
    --change 'ENV PATH=/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64' \
    --change 'ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]' \
    --change 'CMD ["python3"]' - "$TAG" > /dev/null
echo "py37: built $TAG"
