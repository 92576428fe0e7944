# swnaa.sh -- sourced by the benchmark scripts (tests/bench/ci.sh, tests/rxe-vm/bench-guest.sh):
#
#   swnaa_start SWNAA LOG [naaice-swnaa options...]
#
# Starts SWNAA (a naaice-swnaa binary) on --port 0 with --log info, output into LOG, and waits
# (up to about 15 s) for the port it prints ("naaice-swnaa listening on ADDR:PORT (...)"). Sets
# swnaa_pid and swnaa_port and returns 0; if it did not start, prints its log to stderr, stops
# it and returns 1.
swnaa_start() {
    local bin=$1 log=$2 _
    shift 2
    swnaa_port=
    "$bin" --port 0 --log info "$@" > "$log" 2>&1 &
    swnaa_pid=$!
    for _ in $(seq 300); do
        swnaa_port=$(sed -n 's/^naaice-swnaa listening on [^ ]*:\([0-9][0-9]*\)\( .*\)\{0,1\}$/\1/p' "$log")
        [ -n "$swnaa_port" ] && return 0
        kill -0 "$swnaa_pid" 2> /dev/null || break
        sleep 0.05
    done
    echo "naaice-swnaa did not start:" >&2
    cat "$log" >&2
    kill "$swnaa_pid" 2> /dev/null
    wait "$swnaa_pid" 2> /dev/null
    swnaa_pid=
    return 1
}
