#!/usr/bin/env bash
# Set up a Docker engine and the offline test images on a fresh Debian machine (root).
#   bash images/setup-engine.sh [RECIPE ...]     default: base tf-2.12 tf-2.21 libs
#   bash images/setup-engine.sh --engine-only    the engine, no images (CI builds them
#                                                beside the other setup stages)
# Installs docker.io + debootstrap from Debian's packages when missing, starts dockerd
# (no iptables, no bridge: containers run with network off) when no engine answers,
# then builds the images of images/images.yaml that are missing or out of date.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt-need.sh"
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
need_packages setup $ENGINE_NEEDS   # what each is for: images/apt-need.sh
if ! docker info >/dev/null 2>&1; then
    echo "setup: starting dockerd (log: /tmp/harness-dockerd.log)"
    drop_stale /var/run/docker.pid dockerd
    drop_stale /var/run/docker/containerd/containerd.pid containerd
    # From /: a daemon's working directory is never a checkout (see setup-podman.sh).
    (cd / && exec setsid nohup dockerd --iptables=false --bridge=none) \
        >/tmp/harness-dockerd.log 2>&1 </dev/null &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -20 /tmp/harness-dockerd.log; exit 3; }
fi
if [ "${1:-}" = "--engine-only" ]; then exit 0; fi
if [ "$#" -eq 0 ]; then set -- base tf-2.12 tf-2.21 libs; fi
python3 -m harness images build "$@"
