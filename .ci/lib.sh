# Shell functions shared by the CI stage scripts; source it (`. .ci/lib.sh`), it runs nothing.

# Installs the Debian packages among "$@" that are missing (as root, or through sudo).
apt_install() {
    local p missing=() sudo=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    ((${#missing[@]})) || return 0
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}"
}

# A stage's timings: `lap NAME` records the time since the previous lap (or since sourcing).
timings=()
mark=$SECONDS
lap() {
    timings+=("$1 $((SECONDS - mark)) s")
    mark=$SECONDS
}

# A free TCP port on 127.0.0.1 (nothing answers a connect to it), below the kernel's
# ephemeral range: a port in that range may be the local end of some other connection (or
# of one in TIME-WAIT), which a connect does not see but a listener's bind fails on.
free_port() {
    local p low=32768
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    [ "$low" -gt 11000 ] 2>/dev/null || low=32768
    while :; do
        p=$((10000 + RANDOM % (low - 10000)))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# Waits until something listens on 127.0.0.1:PORT (at most SECONDS, default 10); false if not.
wait_listen() {
    local port=$1 until=$((SECONDS + ${2:-10}))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        [ "$SECONDS" -lt "$until" ] || return 1
        sleep 0.05
    done
}

# Background processes to stop on exit: append their pids to naa_pids; `stop_naas` kills and
# reaps them.
naa_pids=()
stop_naas() {
    local pid
    for pid in "${naa_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${naa_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}

# A work directory for the stage in $work, removed on exit after the processes in naa_pids
# are stopped.
workdir() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/naaice-$1.XXXXXX")
    trap 'stop_naas; rm -rf "$work"' EXIT
}
