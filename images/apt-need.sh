# Sourced by images/setup-*.sh: install the Debian packages whose commands are missing,
# and tell a daemon's live pid file from a stale one.
#   need_packages LABEL COMMAND:PACKAGE ...
# A command counts as present when it is on PATH or executable in /usr/sbin; LABEL
# starts the one line said when something is installed.
need_packages() {
    local label=$1 need="" pair
    shift
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || [ -x "/usr/sbin/${pair%%:*}" ] || need="$need ${pair#*:}"
    done
    if [ -n "$need" ]; then
        echo "$label: installing$need"
        apt-get update -qq
        apt-get install -y -qq $need >/dev/null
    fi
}

# What each setup script needs, as COMMAND:PACKAGE pairs: listed here once, so that
# images/setup-packages.sh installs all of them with one apt-get (CI) and each script
# alone still installs its own.
# docker.io: the engine (and `docker system dial-stdio` for ssh:// endpoints);
# debootstrap: the base image; openssh-*: the ssh:// endpoint test on loopback;
# gcc: the fake libnvidia-ml.so.1 the NVML tests and the simulated GPU hosts build;
# docker-registry: a real registry on loopback for `harness watch`; chromium: the HTML
# report screenshot test.
ENGINE_NEEDS="dockerd:docker.io debootstrap:debootstrap sshd:openssh-server ssh:openssh-client
    gcc:gcc docker-registry:docker-registry chromium:chromium"
# podman and its Docker-compatible service (curl pings it); catatonit is `init: true`.
PODMAN_NEEDS="podman:podman curl:curl"
catatonit_needed() {
    [ ! -x /usr/libexec/podman/catatonit ] && [ ! -x /usr/bin/catatonit ]
}
# A single-node Slurm with accounting (slurmdbd + MariaDB).
SLURM_NEEDS="slurmctld:slurmctld slurmd:slurmd sinfo:slurm-client munged:munge
    slurmdbd:slurmdbd mariadbd:mariadb-server"

# runs_as PIDFILE NAME: the pid in PIDFILE is a running NAME. kill -0 alone is not
# enough: a machine restored from a snapshot keeps /run's pid files while its pids are
# handed to other processes, and a daemon that trusts such a file waits on a socket
# nobody serves (dockerd: "containerd is still running", then a timeout).
runs_as() {
    local pid
    pid="$(cat "$1" 2>/dev/null || true)"
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = "$2" ]
}
# drop_stale PIDFILE NAME: remove PIDFILE unless a running NAME owns it.
drop_stale() {
    if [ -e "$1" ] && ! runs_as "$1" "$2"; then rm -f "$1"; fi
}
