#!/usr/bin/env bash
# CI's check of the software NAA's metrics with a real Prometheus (Debian's `prometheus`):
# starts naaice-swnaa --metrics and a Prometheus that scrapes it every second, runs a known
# workload (1000 RPCs of kernel 1, one client from an address --allow refuses, one RPC of a
# function code without a kernel), then asks Prometheus's HTTP API for the counters and fails
# unless each equals what the workload did. Also prints a scrape excerpt, naaice-info
# --metrics's summary, and checks that the Grafana dashboard parses and names only metrics
# the NAA exposes. About 30 s after the builds.
set -euo pipefail
cd "$(dirname "$0")/../.."
. .ci/lib.sh

apt_install prometheus curl jq
prometheus --version 2>&1 | head -n 1
cargo build --release -q -p naaice-swnaa -p naaice-info
cargo build --release -q -p naaice --example stats
lap build

workdir metrics
naa_port=$(free_port)
metrics_port=$(free_port)
prom_port=$(free_port)
target/release/naaice-swnaa --address 127.0.0.1 --port "$naa_port" --transport soft \
    --allow 127.0.0.1/32 --metrics "127.0.0.1:$metrics_port" --log warn 2>"$work/swnaa.log" &
naa_pids+=($!)
wait_listen "$metrics_port" || { cat "$work/swnaa.log"; exit 1; }

cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: naaice-swnaa
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn 2>"$work/prometheus.log" &
naa_pids+=($!)
wait_listen "$prom_port" 30 || { cat "$work/prometheus.log"; exit 1; }
lap "start NAA and Prometheus"

# The workload: 1000 checked RPCs, one connect from 127.0.0.2 (refused by --allow), one RPC of
# function code 9 (no kernel: SOCKET_UNAVAIL).
export NAAICE_TRANSPORT=soft
NAA_SPEC="127.0.0.1:$naa_port:1:1" NAAICE_STATS=1 target/release/examples/stats 1000
# naaice-info --probe connects once (the library's selection would retry until its deadline).
if NAA_LOCAL_IP=127.0.0.2 target/release/naaice-info --spec "127.0.0.1:$naa_port:1:1" --probe \
    --timeout 5s >"$work/denied.txt" 2>&1; then
    echo "a client from 127.0.0.2 was not refused" >&2
    exit 1
fi
grep -q "access denied" "$work/denied.txt" || { cat "$work/denied.txt"; exit 1; }
if NAA_SPEC="127.0.0.1:$naa_port:9:1" target/release/examples/stats 1 9 2>"$work/unavail.txt"; then
    echo "function code 9 was answered with success" >&2
    exit 1
fi
grep -q "SOCKET_UNAVAIL" "$work/unavail.txt" || { cat "$work/unavail.txt"; exit 1; }
lap workload

echo "scrape excerpt (curl http://127.0.0.1:$metrics_port/metrics):"
curl -fsS "http://127.0.0.1:$metrics_port/metrics" |
    grep -E '^naaice_naa_(rpcs_total|connections_(accepted|rejected)_total|mrsp_total|rpc_seconds_(count|sum)|memory_budget_used_bytes)' |
    sed 's/^/  /'

# Asks Prometheus for QUERY until it answers EXPECTED (the scrapes after the workload), at
# most 30 s; prints the query and the answer.
query() {
    local q=$1 expected=$2 until=$((SECONDS + 30)) got
    while :; do
        got=$(curl -fsS --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$q" |
            jq -r '.data.result[0].value[1] // "none"')
        [ "$got" = "$expected" ] && break
        if [ "$SECONDS" -ge "$until" ]; then
            echo "Prometheus: $q = $got, expected $expected" >&2
            cat "$work/prometheus.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    echo "Prometheus: $q = $got"
}
query 'sum(naaice_naa_rpcs_total{job="naaice-swnaa",fncode="1",rc="0"})' 1000
query 'naaice_naa_rpcs_total{fncode="unknown",rc="1"}' 1
query 'naaice_naa_connections_rejected_total{reason="allow"}' 1
query 'naaice_naa_connections_accepted_total' 2
query 'naaice_naa_rpc_seconds_count{fncode="1"}' 1000
query 'naaice_naa_rpc_input_bytes_total{fncode="1"}' 64000
query 'naaice_naa_mrsp_total{result="ok"}' 2
query 'naaice_naa_connections_open' 0
p99=$(curl -fsS --get "http://127.0.0.1:$prom_port/api/v1/query" \
    --data-urlencode 'query=histogram_quantile(0.99, sum by (le) (naaice_naa_rpc_seconds_bucket))' |
    jq -r '.data.result[0].value[1]')
echo "Prometheus: RPC time p99 (server side) = $p99 s"
lap "Prometheus queries"

echo "naaice-info --metrics 127.0.0.1:$metrics_port:"
target/release/naaice-info --metrics "127.0.0.1:$metrics_port" | tee "$work/info.txt"
grep -q "1001 RPCs served" "$work/info.txt"

# The Grafana dashboard: valid JSON, and every metric its queries name is one the NAA serves.
dashboard=docs/grafana/naaice-swnaa.json
jq -e '.panels | length > 0' "$dashboard" >/dev/null
served=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" | sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p')
for m in $(jq -r '.. | .expr? // empty' "$dashboard" | grep -o 'naaice_naa_[a-z_]*' | sort -u); do
    base=$(echo "$m" | sed -E 's/_(bucket|sum|count)$//')
    echo "$served" | grep -qx "$base" || { echo "$dashboard names $m, not served" >&2; exit 1; }
done
echo "Grafana dashboard $dashboard: parses, names only served metrics"
lap "dashboard"
printf 'metrics stage: %s\n' "${timings[@]}"
