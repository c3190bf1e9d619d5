#!/usr/bin/env bash
# Two simulated NVIDIA GPU hosts on this machine (no GPU needed), for tests and CI:
#   unix:///run/harness-sim/3090.sock  2x "NVIDIA GeForce RTX 3090" (8.6, 24 GiB), driver
#       525.147.05 / CUDA 12.0; the fake `nvidia` runtime is its default runtime (as on
#       hosts set up for GPU containers without --gpus)
#   unix:///run/harness-sim/4090.sock  1x "NVIDIA GeForce RTX 4090" (8.9, 24 GiB), same driver;
#       GPUs only through --gpus (DeviceRequest), Docker's default; also on
#       tcp://127.0.0.1:23909 (loopback, no TLS) to stand for a remote engine in tests
# Each is a separate dockerd (own data-root, exec-root, pidfile, socket; no iptables, no
# bridge) whose PATH alone holds the fake nvidia-container-runtime-hook (images/gpu-sim),
# so only these engines register Docker's `nvidia` device driver; the main engine at
# /var/run/docker.sock gets no GPU. The hook puts the fake libnvidia-ml.so.1
# (tests/data/fake_nvml/fake_nvml.c) and a GPU profile into each GPU container.
# The NGC-like TF1 stand-ins are built in the main engine (images/images.yaml: py37,
# ngc-20.12, ngc-22.12) and loaded into each simulated engine under NGC's names
# nvcr.io/nvidia/tensorflow:{20.12,22.12}-tf1-py3 (skipped when already there).
# Idempotent: running engines are kept; files are refreshed in place.
#   bash images/setup-gpu-sim.sh          start (or refresh) both, load the images
#   bash images/setup-gpu-sim.sh engines  start (or refresh) both, no images
#   bash images/setup-gpu-sim.sh stop     stop both simulated engines
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt-need.sh"
cd "$(dirname "$0")/.."
SIM=/run/harness-sim
DATA=/var/lib/harness-sim
MiB=1048576
# The real interpreter behind `python3` (not a version manager's shim), for the fake runtime.
PY="$(python3 -c 'import sys; print(sys.executable)')"
NAMES="3090 4090"
TCP_4090=23909

stop_engine() {
    local pidfile="$SIM/$1.pid" pid
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if runs_as "$pidfile" dockerd; then
        echo "gpu-sim: stopping engine $1 (pid $pid)"
        kill "$pid"
        for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
}
if [ "${1:-}" = "stop" ]; then
    for n in $NAMES; do stop_engine "$n"; done
    exit 0
fi

command -v gcc >/dev/null || { apt-get update -qq; apt-get install -y -qq gcc >/dev/null; }
command -v dockerd >/dev/null || { echo "gpu-sim: dockerd missing: run images/setup-engine.sh first" >&2; exit 3; }

gpu() {  # uuid cc total_bytes reserved_bytes used_bytes name
    printf '{"uuid": "%s", "cc": "%s", "total": %s, "reserved": %s, "used": %s, "name": "%s"}' "$@"
}
# Simulated figures: 24 GiB boards, a few hundred MiB reserved by the driver (NVML v2's
# `reserved`), a couple of MiB used by the driver's context on an idle GPU.
profile() {
    case "$1" in
    3090) echo "{\"driver\": \"525.147.05\", \"cuda\": 12000, \"gpus\": [
        $(gpu GPU-5a3b0c1e-3090-4a00-8000-000000000000 8.6 $((24576 * MiB)) $((333 * MiB)) $((2 * MiB)) "NVIDIA GeForce RTX 3090"),
        $(gpu GPU-5a3b0c1e-3090-4a00-8000-000000000001 8.6 $((24576 * MiB)) $((333 * MiB)) $((2 * MiB)) "NVIDIA GeForce RTX 3090")]}" ;;
    4090) echo "{\"driver\": \"525.147.05\", \"cuda\": 12000, \"gpus\": [
        $(gpu GPU-7c4d1f2a-4090-4b00-8000-000000000000 8.9 $((24564 * MiB)) $((377 * MiB)) $((2 * MiB)) "NVIDIA GeForce RTX 4090")]}" ;;
    esac
}

for n in $NAMES; do
    bin="$SIM/$n/bin"
    mkdir -p "$bin" "$DATA/$n"
    # Files next to the hook are its configuration (see the hook's docstring).
    install -m 0755 images/gpu-sim/nvidia-container-runtime-hook images/gpu-sim/nvidia-container-runtime "$bin/"
    # Both run several times a container (create, start, state, delete; the hook): under
    # `#!/usr/bin/env python3` a version manager's shim (pyenv: ~10 bash processes) ran
    # before each. The interpreter itself, without site (they use the stdlib only).
    sed -i "1s|.*|#!$PY -S|" "$bin/nvidia-container-runtime-hook" "$bin/nvidia-container-runtime"
    profile "$n" > "$bin/gpus.json.tmp" && mv "$bin/gpus.json.tmp" "$bin/gpus.json"
    if [ ! -f "$bin/libnvidia-ml.so.1" ] || [ tests/data/fake_nvml/fake_nvml.c -nt "$bin/libnvidia-ml.so.1" ]; then
        gcc -shared -fPIC -O2 -Wall -Werror -o "$bin/libnvidia-ml.so.1.tmp" tests/data/fake_nvml/fake_nvml.c
        mv "$bin/libnvidia-ml.so.1.tmp" "$bin/libnvidia-ml.so.1"
    fi
    sock="$SIM/$n.sock"
    extra=""
    tcp=""
    if [ "$n" = 3090 ]; then
        extra="--add-runtime nvidia=$bin/nvidia-container-runtime --default-runtime nvidia"
    else
        # Also on loopback TCP: a "remote" endpoint for tests (files copied in and out,
        # GPUs learnt through the engine). Loopback only; no TLS.
        tcp="tcp://127.0.0.1:$TCP_4090"
        extra="-H $tcp"
    fi
    if docker -H "unix://$sock" info >/dev/null 2>&1; then
        if [ -z "$tcp" ] || docker -H "$tcp" info >/dev/null 2>&1; then
            echo "gpu-sim: engine $n answers at unix://$sock${tcp:+ and $tcp}"
            continue
        fi
        stop_engine "$n"
    fi
    echo "gpu-sim: starting engine $n at unix://$sock (log: /tmp/harness-sim-$n.log)"
    # As docker.service's LimitMEMLOCK=infinity: containers may then ask for memlock -1 (NGC).
    ulimit -l unlimited 2>/dev/null || true
    drop_stale "$SIM/$n.pid" dockerd
    drop_stale "$SIM/$n/exec/containerd/containerd.pid" containerd
    # From / (never a checkout: see setup-podman.sh).
    # shellcheck disable=SC2086
    (cd / && PATH="$bin:$PATH" exec setsid nohup dockerd --data-root "$DATA/$n" \
        --exec-root "$SIM/$n/exec" --pidfile "$SIM/$n.pid" -H "unix://$sock" \
        --iptables=false --bridge=none $extra) > "/tmp/harness-sim-$n.log" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do docker -H "unix://$sock" info >/dev/null 2>&1 && break; sleep 1; done
    docker -H "unix://$sock" info >/dev/null 2>&1 || { tail -20 "/tmp/harness-sim-$n.log" >&2; exit 3; }
done

if [ "${1:-}" = "engines" ]; then exit 0; fi
# The NGC-like images: built (cached by recipe hash) in the main engine, then copied into
# both simulated engines at once, each in one `docker save | docker load` of the images it
# lacks (their shared layers, the py37 base, travel once).
python3 -m harness images build py37 ngc-20.12 ngc-22.12
load_into() {  # load_into NAME: the NGC-like images engine NAME lacks, in one load
    local n=$1 v src dst want have missing=""
    for v in 20.12 22.12; do
        src="harness-test/ngc-tf:$v-tf1-py3"
        dst="nvcr.io/nvidia/tensorflow:$v-tf1-py3"
        want="$(docker image inspect "$src" --format '{{.Id}}')"
        have="$(docker -H "unix://$SIM/$n.sock" image inspect "$dst" --format '{{.Id}}' 2>/dev/null || true)"
        if [ "$want" = "$have" ]; then
            echo "gpu-sim: $n: $dst is up to date"
        else
            missing="$missing $v"
        fi
    done
    [ -n "$missing" ] || return 0
    echo "gpu-sim: $n: loading nvcr.io/nvidia/tensorflow:{$(echo $missing | tr ' ' ,)}-tf1-py3 ..."
    # shellcheck disable=SC2046
    docker save $(for v in $missing; do echo "harness-test/ngc-tf:$v-tf1-py3"; done) \
        | docker -H "unix://$SIM/$n.sock" load -q > /dev/null
    for v in $missing; do
        docker -H "unix://$SIM/$n.sock" tag "harness-test/ngc-tf:$v-tf1-py3" \
            "nvcr.io/nvidia/tensorflow:$v-tf1-py3"
    done
}
pids=""
for n in $NAMES; do
    load_into "$n" &
    pids="$pids $!"
done
failed=0
for pid in $pids; do wait "$pid" || failed=1; done
if [ "$failed" = 1 ]; then echo "gpu-sim: loading the NGC-like images failed (see above)" >&2; exit 3; fi
echo "gpu-sim: ready: DOCKER_HOST=unix://$SIM/3090.sock (2x RTX 3090), unix://$SIM/4090.sock (1x RTX 4090)"
