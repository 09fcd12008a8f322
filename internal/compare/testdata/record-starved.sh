#!/usr/bin/env bash
# Records testdata/starved: the documents of the noise guard's tests
# (starvation, internal/compare/doc.go "Noise guard").
# Usage: internal/compare/testdata/record-starved.sh "host=... port=... user=postgres"
# (a superuser DSN without dbname, on this machine so the noise figures
# are recorded). Smoke workload, 6 VUs on 3 connections, 6 s each, as
# record.sh; rounds in the order q h s h q s s q h:
#   starved/quiet-N.json   three rounds, nothing beside
#   starved/hog-N.json     the same configuration with `erplab stress --cpu 4`
#                          beside (the 2-core host saturated, the server starved)
#   starved/slow-N.json    the database with commit_delay 40 ms (post_order
#                          and temp_churn wait 40 ms per commit), the stress beside
# quiet against hog is an A/A whose one side starved; slow against quiet
# a real effect with unequal starvation.
set -euo pipefail
cd "$(dirname "$0")"
DSN=$1
ERPLAB=${ERPLAB:-go run ../../../cmd/erplab}
mkdir -p starved
db() { psql "$DSN dbname=postgres" -qc "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"; }
slowdb() { db "$1"; psql "$DSN dbname=postgres" -qc "ALTER DATABASE $1 SET commit_delay = 40000" -c "ALTER DATABASE $1 SET commit_siblings = 0"; }
run() { # db out
	$ERPLAB run --workload smoke --dsn "$DSN dbname=$1" --users 6 --connections 3 --think 10ms-30ms \
		--duration 6s --progress 0 --seed 7 --out "$2" >/dev/null
	rm -f "${2%.json}.jsonl"
}
hogged() { # db out
	$ERPLAB stress --cpu 4 --timeout 9s -q >/dev/null &
	local hog=$!
	sleep 1
	run "$1" "$2"
	wait $hog
}
declare -A round=([quiet]=0 [hog]=0 [slow]=0)
n=0
for v in quiet hog slow hog quiet slow slow quiet hog; do
	n=$((n + 1))
	round[$v]=$((round[$v] + 1))
	out=starved/$v-${round[$v]}.json
	case $v in
	quiet) db rec_s$n; run rec_s$n "$out" ;;
	hog) db rec_s$n; hogged rec_s$n "$out" ;;
	slow) slowdb rec_s$n; hogged rec_s$n "$out" ;;
	esac
done
