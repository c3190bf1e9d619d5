#!/usr/bin/env bash
# Set up podman for `runtime: podman` cells on a Debian machine (root), after
# images/setup-engine.sh has built the offline test images in Docker.
#   bash images/setup-podman.sh [IMAGE ...]     default: harness-test/base:bookworm
# Installs podman (+ catatonit, the `init: true` of a cell) when missing, starts its
# Docker-compatible service on /run/podman/podman.sock when nothing answers there, and
# copies the named images from Docker into podman (`docker save | podman load`), each
# skipped when podman already holds the same image id. Idempotent: a second run that
# finds everything in place asks podman and Docker one question per image.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt-need.sh"
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
need_packages setup-podman $PODMAN_NEEDS
if catatonit_needed; then need_packages setup-podman catatonit:catatonit; fi
SOCK=/run/podman/podman.sock
answers() { curl -sf --max-time 5 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }
if ! answers; then
    echo "setup-podman: starting podman system service on $SOCK (log: /tmp/harness-podman.log)"
    mkdir -p "$(dirname "$SOCK")"
    # From /: conmon writes an empty `oom` file into the service's working directory
    # when a container is OOM-killed (never into a checkout, as it did).
    # The redirections are the subshell's, so nothing it leaves holds this script's output.
    (cd / && exec setsid nohup podman system service --time=0 "unix://$SOCK") \
        >/tmp/harness-podman.log 2>&1 </dev/null &
    for _ in $(seq 1 30); do answers && break; sleep 1; done
    answers || { tail -20 /tmp/harness-podman.log; exit 3; }
fi
if [ "$#" -eq 0 ]; then set -- harness-test/base:bookworm; fi
for image in "$@"; do
    want=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || {
        echo "setup-podman: $image is not in Docker (bash images/setup-engine.sh builds it)"; exit 3; }
    have=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    if [ "sha256:${have#sha256:}" != "$want" ]; then
        echo "setup-podman: copying $image from Docker into podman"
        docker save "$image" | podman load -q >/dev/null
    fi
done
