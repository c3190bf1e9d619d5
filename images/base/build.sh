#!/usr/bin/env bash
# Build the offline test base image: a minimal Debian with python3, imported into
# the local Docker engine. Containers have no network, so everything else is COPYed
# on top of this by `python -m harness images build`.
# Usage: images/base/build.sh [TAG]   (default harness-test/base:bookworm)
# The apt mirror is read from this machine's apt sources so no host name is written here.
set -euo pipefail
TAG="${1:-harness-test/base:bookworm}"
SUITE="${SUITE:-bookworm}"
RECIPE_HASH="$(sha256sum "$0" | cut -c1-16)"
if docker image inspect "$TAG" --format '{{index .Config.Labels "harness.recipe"}}' 2>/dev/null \
        | grep -qx "$RECIPE_HASH"; then
    echo "base: $TAG is up to date (recipe $RECIPE_HASH)"
    exit 0
fi
# RECIPE_CHECK=1 (`harness images build --check`): say so, build nothing.
if [ "${RECIPE_CHECK:-}" = 1 ]; then echo "base: $TAG is out of date"; exit 1; fi
MIRROR="${MIRROR:-$(python3 "$(dirname "$0")/mirror.py" "$SUITE")}"
if [ -z "$MIRROR" ]; then
    echo "base: no apt mirror found in /etc/apt/sources*; set MIRROR" >&2
    exit 3
fi
ROOTFS="$(mktemp -d /tmp/harness-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
echo "base: debootstrap $SUITE (python3) ... (about a minute)"
debootstrap --variant=minbase --include=python3,python3-distutils,procps \
    "$SUITE" "$ROOTFS" "$MIRROR" > "$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
echo "base: docker import -> $TAG"
tar -C "$ROOTFS" -c . | docker import \
    --change "LABEL harness.recipe=$RECIPE_HASH" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' - "$TAG" > /dev/null
echo "base: built $TAG"
