#!/bin/sh
# The docker half of harness culprit's demo: two images of the same aiohttp-like stack
# (examples/culprit.yaml's pins) on harness-test/base:bookworm (Python 3.11, no pip).
# Each stack is installed here with `pip install --target` (this machine's index) and
# copied into the image's dist-packages: the builds need no network, the RECORDs are
# pip's own.
#   sh examples/culprit/build-images.sh && harness sweep examples/culprit/docker.yaml
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build() {
    tag=$1; shift
    mkdir -p "$work/$tag/site"
    python3 -m pip install -q --disable-pip-version-check --no-compile --target "$work/$tag/site" \
        --python-version 3.11 --only-binary=:all: "$@"
    printf 'FROM harness-test/base:bookworm\nCOPY site/ /usr/local/lib/python3.11/dist-packages/\n' \
        > "$work/$tag/Dockerfile"
    docker build -q --network none -t "harness-culprit-demo:$tag" "$work/$tag"
}
build stack-2024 multidict==6.4.4 yarl==1.9.4 attrs==23.2.0 frozenlist==1.4.1 idna==3.6
build stack-2025 multidict==6.6.3 yarl==1.20.1 attrs==25.3.0 frozenlist==1.7.0 idna==3.10 \
    propcache==0.3.2
echo "built harness-culprit-demo:stack-2024 and :stack-2025 ($here/docker.yaml sweeps them)"
