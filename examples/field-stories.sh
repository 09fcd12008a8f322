#!/usr/bin/env bash
# Reproduce the field stories of docs/field-notes.md at this machine's scale
# with erplab ab (each story: one throwaway server, the ERP data built once into a
# template, baseline and variant from identical copies, same seed and load):
#   (a) ERP baseline vs rewrite-proxy: APDEX of or_subquery_report and the integral
#   (b) 1C temp tables on disk vs tmpfs-temp-tablespace: catalog growth,
#       temp_table_storm latency, system CPU (needs root: it mounts a tmpfs)
#   (c) baseline vs the settings profile examples/erp-profile.conf
# Usage: examples/field-stories.sh [OUT_DIR]   (env: ERPLAB, SCALE, USERS, DURATION, ROUNDS)
# Each story runs ROUNDS (3) rounds per configuration in the order A B B A A B
# and compares over the rounds: about 20 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
ERPLAB=${ERPLAB:-}
if [[ -z $ERPLAB ]]; then
	ERPLAB=$(mktemp -d)/erplab
	go build -o "$ERPLAB" ./cmd/erplab
fi
OUT=${1:-erplab-results/field-stories-$(date +%Y%m%d-%H%M%S)}
SCALE=${SCALE:-0.2}
USERS=${USERS:-20}
DURATION=${DURATION:-45s}
ROUNDS=${ROUNDS:-3}
LOAD=(--workload erp --scale "$SCALE" --users "$USERS" --duration "$DURATION" --warmup 5s
	--think 500ms-1500ms --seed 42 --progress 15s --rounds "$ROUNDS")
mkdir -p "$OUT"

"$ERPLAB" ab "${LOAD[@]}" --variant proxy=rewrite-proxy --out-dir "$OUT/a-proxy" | tee "$OUT/a-proxy.txt"
"$ERPLAB" ab "${LOAD[@]}" --temp-style 1c --variant tmpfs=tmpfs-temp-tablespace --out-dir "$OUT/b-tmpfs" | tee "$OUT/b-tmpfs.txt"
"$ERPLAB" ab "${LOAD[@]}" --variant profile=settings:examples/erp-profile.conf --out-dir "$OUT/c-settings" | tee "$OUT/c-settings.txt"

# The numbers of each story, from the compare tables the runs printed.
pick() { # file pattern...
	local f=$1; shift
	for p in "$@"; do grep -E "^$p" "$f" | tail -n 1 || true; done
}
echo
echo "=== (a) baseline vs rewrite-proxy ($OUT/a-proxy)"
pick "$OUT/a-proxy.txt" 'or_subquery_report +apdex' 'or_subquery_report +p95_ms' 'integral +apdex' 'integral +per_second'
command -v jq >/dev/null && jq -r '.extra.remedies[] | select(.kind=="rewrite-proxy") | "proxy: \(.changed.rewrites) of \(.changed.statements) statements rewritten"' "$OUT/a-proxy/proxy-1.json"
echo "=== (b) 1C temp tables on disk vs tmpfs-temp-tablespace ($OUT/b-tmpfs)"
pick "$OUT/b-tmpfs.txt" 'temp_table_storm +apdex' 'temp_table_storm +p50_ms' 'temp_table_storm +p95_ms' 'catalog +growth_bytes' 'host CPU +system_pct' 'integral +apdex'
echo "=== (c) baseline vs settings profile ($OUT/c-settings)"
pick "$OUT/c-settings.txt" 'integral +apdex' 'integral +per_second' 'sales_turnover_report +p95_ms' 'stock_balance_report +p95_ms' 'document_form +p95_ms'
