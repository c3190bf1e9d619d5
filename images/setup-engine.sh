#!/usr/bin/env bash
# Set up a Docker engine and the offline test images on a fresh Debian machine (root).
#   bash images/setup-engine.sh [RECIPE ...]     default: base tf-2.12 tf-2.21 libs
# Installs docker.io + debootstrap from Debian's packages when missing, starts dockerd
# (no iptables, no bridge: containers run with network off) when no engine answers,
# then builds the images of images/images.yaml that are missing or out of date.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    echo "setup: installing docker.io and debootstrap"
    apt-get update -qq
    apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
    echo "setup: starting dockerd (log: /tmp/harness-dockerd.log)"
    setsid nohup dockerd --iptables=false --bridge=none >/tmp/harness-dockerd.log 2>&1 </dev/null &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -20 /tmp/harness-dockerd.log; exit 3; }
fi
if [ "$#" -eq 0 ]; then set -- base tf-2.12 tf-2.21 libs; fi
python3 -m harness images build "$@"
