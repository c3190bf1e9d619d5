#!/usr/bin/env bash
# Install every Debian package the setup scripts need (images/apt-need.sh lists them)
# with one `apt-get update` and one `apt-get install`, so that the setup scripts run
# after it install nothing and can run side by side (apt's lock is taken once, here).
#   bash images/setup-packages.sh
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt-need.sh"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
set -- $ENGINE_NEEDS $PODMAN_NEEDS $SLURM_NEEDS
if catatonit_needed; then set -- "$@" catatonit:catatonit; fi
need_packages setup-packages "$@"
