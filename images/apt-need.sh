# Sourced by images/setup-*.sh: install the Debian packages whose commands are missing.
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
