#!/usr/bin/env bash
# Records the run documents the pure tests of package compare read.
# Usage: internal/compare/testdata/record.sh "host=... port=... user=postgres"
# (a superuser DSN without dbname, on this machine so the noise figures
# are recorded). Smoke workload, 6 VUs on 3 connections, 6 s each.
#   base.json, base-slow.json   one run each; slow's database has commit_delay
#                          40 ms (commit_siblings 0): post_order and
#                          temp_churn wait 40 ms per commit
#   aa-quiet.json, aa-hog.json   the same configuration twice, the second
#                          with `erplab stress --cpu 2` running beside
#   r-base-N.json, r-slow-N.json   three rounds of each, order A B B A A B
# Not from this script (copied from examples/ab-calibration.sh output):
#   aa-erp/{baseline,same}-N.json   comparison aa-10 of PARTS=aa (erp scale
#                          0.2, 20 VUs, 8 s, 3 rounds a side, 2026-12-01
#                          16:02 UTC, load average ~30, the CPU hog beside
#                          same rounds 1-3 and baseline round 2)
#   tmpfs-erp/{baseline,tmpfs}-N.json   rounds 1-4 of PARTS=tmpfs ROUNDS=10
#                          (2026-12-01 15:22-15:44 UTC, load average ~25),
#                          interval histograms removed:
#                          jq -c 'del(.series[].ops[]?.histogram_us)'
#   scale-erp/data02.json, asked01.json   erp on one data set: erplab run
#                          --workload erp --scale 0.02 --users 4 --duration 3s
#                          --warmup 1s --observe=false --seed 42 --keep, then the
#                          same with --dsn of the kept server and --scale 0.01
#                          (it runs on the installed 0.02 data set)
set -euo pipefail
cd "$(dirname "$0")"
DSN=$1
ERPLAB=${ERPLAB:-go run ../../../cmd/erplab}
db() { psql "$DSN dbname=postgres" -qc "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"; }
slowdb() { db "$1"; psql "$DSN dbname=postgres" -qc "ALTER DATABASE $1 SET commit_delay = 40000" -c "ALTER DATABASE $1 SET commit_siblings = 0"; }
run() { # db out
	$ERPLAB run --workload smoke --dsn "$DSN dbname=$1" --users 6 --connections 3 --think 10ms-30ms \
		--duration 6s --progress 0 --seed 7 --out "$2" >/dev/null
	rm -f "${2%.json}.jsonl"
}
db rec_base; run rec_base base.json
slowdb rec_slow; run rec_slow base-slow.json
db rec_aa1; run rec_aa1 aa-quiet.json
db rec_aa2
$ERPLAB stress --cpu 2 --timeout 9s -q >/dev/null &
hog=$!
sleep 1
run rec_aa2 aa-hog.json
wait $hog
n=0
for v in base slow slow base base slow; do
	n=$((n + 1))
	case $v in base) db rec_r$n ;; slow) slowdb rec_r$n ;; esac
	r=1; [[ -e r-$v-1.json ]] && r=2; [[ -e r-$v-2.json ]] && r=3
	run rec_r$n r-$v-$r.json
done
