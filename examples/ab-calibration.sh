#!/usr/bin/env bash
# Calibration of erplab ab's verdicts (issue 14): false verdicts of A/A
# comparisons under a neighbour's load, and the power on known effects.
# Not part of `go test` (it takes the better part of an hour on 2 cores).
#
#  1. A/A: `erplab ab --aa $AA` (default 20 comparisons of $AA_ROUNDS rounds
#     per side, erp workload), with a CPU hog (`erplab stress --cpu 2`)
#     running during half of the runs, chosen at random (seed 42) by a
#     --run-hook. Goal: at most 1 of the 20 comparisons shows any
#     better/worse row.
#  2. Power, $ROUNDS rounds per side each:
#     sleep: smoke workload, variant settings:examples/commit-delay-40ms.conf
#            (commit_delay = 40 ms: every WAL-flushing commit waits 40 ms, a
#            realistic way to inject a 40 ms sleep into an operation):
#            post_order must be worse;
#     proxy: erp at the scale of examples/field-stories.sh, variant
#            rewrite-proxy: or_subquery_report must be better;
#     tmpfs: erp --temp-style 1c, variant tmpfs-temp-tablespace (root):
#            temp_table_storm must be better;
#     settings: erp, variant settings:examples/join-collapse-limit.conf
#            (join_collapse_limit = 1: the 20+ LEFT JOINs of document_form's
#            header planned in the written order, at every execution):
#            document_form plan_ms (pg_stat_statements, attributed by the
#            engine's statement texts) must be better.
#     tmpfs-aged: every run database aged for $AGE first (erplab ab --age),
#            the server profiled (--profile), STORM_USERS (24) VUs running
#            only temp_table_storm (--mix), so the storm's own CPU is what
#            the server queues on: temp_table_storm must be better, and the
#            file system's share of the server's CPU (row "cpu file system
#            share_pct", declared with the aim lower) better; decided with
#            ROUNDS=4 (docs/measurements/2026-12-04-ab-acceptance.md).
# Verdicts are those of the primary rows each remedy declares (erplab ab
# --help; internal/compare/doc.go "Primary and exploratory rows"): the A/A
# part counts, for each remedy's family of primary rows, the comparisons
# whose primary verdict is better, worse, higher, lower or mixed (goal: at most
# the nominal 5 %, quoted as k/n with a 95 % Clopper-Pearson interval),
# and separately the comparisons with any decided row in either family.
# The figures are recomputed from the saved results with `erplab compare`
# at the end (SUMMARY_ONLY=1 OUT_DIR recomputes them without running).
# Usage: examples/ab-calibration.sh [OUT_DIR]
# Issue 31's acceptance is HOG=baseline BG_HOG=2: `erplab stress --cpu 4`
# during every baseline run (the A side of each A/A) and a second hog of
# BG_HOG workers saturating the host throughout the A/A part; then at most
# 1 of the 20 comparisons may show a better/worse row, and none of the
# SINGLE single-run A/As (the first round of each side, compared alone).
# env: ERPLAB, AA (20), AA_ROUNDS (3), AA_DURATION (8s), ROUNDS (3), SCALE (0.2),
#      USERS (20), DURATION (45s), AGE (2m), PARTS ("aa sleep proxy tmpfs settings";
#      tmpfs-aged on request),
#      HOG (random: `stress --cpu 2` during a random half of the A/A runs;
#      baseline: `stress --cpu 4` during every baseline run), BG_HOG (0: CPU
#      workers of a hog running throughout the A/A part), SINGLE (10)
set -euo pipefail
cd "$(dirname "$0")/.."
ERPLAB=${ERPLAB:-}
if [[ -z $ERPLAB ]]; then
	ERPLAB=$(mktemp -d)/erplab
	go build -o "$ERPLAB" ./cmd/erplab
fi
OUT=${1:-erplab-results/ab-calibration-$(date +%Y%m%d-%H%M%S)}
AA=${AA:-20}
AA_ROUNDS=${AA_ROUNDS:-3}
AA_DURATION=${AA_DURATION:-8s}
ROUNDS=${ROUNDS:-3}
SCALE=${SCALE:-0.2}
USERS=${USERS:-20}
DURATION=${DURATION:-45s}
AGE=${AGE:-2m}
PARTS=${PARTS:-aa sleep proxy tmpfs settings}
HOG=${HOG:-random}
BG_HOG=${BG_HOG:-0}
SINGLE=${SINGLE:-10}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

hogdir=$OUT/hog
ours=
stop_hog() { # only a hog this invocation started (another may run the A/A part)
	if [[ -n $ours ]]; then
		for f in "$hogdir/hog.pid" "$hogdir/bg.pid"; do
			[[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null || true
			rm -f "$f"
		done
	fi
}
trap stop_hog EXIT

if [[ -z ${SUMMARY_ONLY:-} ]]; then
	for part in $PARTS; do
		case $part in
		aa)
			# The hog plan: one line per run, exactly half of them 1, shuffled.
			mkdir -p "$hogdir"
			runs=$((AA * 2 * AA_ROUNDS))
			hogcpu=2
			if [[ $HOG == baseline ]]; then
				hogcpu=4
				: >"$hogdir/plan" # empty: the hook looks at the variant
			else
				awk -v n="$runs" 'BEGIN { srand(42); for (i = 1; i <= n; i++) { v[i] = (i <= n / 2) ? 1 : 0 }
					for (i = n; i > 1; i--) { j = int(rand() * i) + 1; t = v[i]; v[i] = v[j]; v[j] = t }
					for (i = 1; i <= n; i++) print v[i] }' >"$hogdir/plan"
			fi
			echo 0 >"$hogdir/count"
			ours=1
			cat >"$hogdir/hook.sh" <<HOOK
#!/bin/sh
# Before every run: stop the hog, start it again if the plan says so. The
# hog is orphaned (started from this shell, which exits), so it is not in
# erplab's process tree: it counts as foreign load.
d=$hogdir
n=\$(( \$(cat \$d/count) + 1 )); echo \$n > \$d/count
[ -f \$d/hog.pid ] && kill \$(cat \$d/hog.pid) 2>/dev/null; rm -f \$d/hog.pid
if [ "\$(sed -n \${n}p \$d/plan)" = 1 ] || { [ $HOG = baseline ] && [ "\$ERPLAB_AB_VARIANT" = baseline ]; }; then
	$ERPLAB stress --cpu $hogcpu --timeout 1h -q >/dev/null 2>&1 &
	echo \$! > \$d/hog.pid
	echo "run \$n (\$ERPLAB_AB_DIR \$ERPLAB_AB_VARIANT round \$ERPLAB_AB_ROUND): hog on" >> \$d/hog.log
else
	echo "run \$n (\$ERPLAB_AB_DIR \$ERPLAB_AB_VARIANT round \$ERPLAB_AB_ROUND): hog off" >> \$d/hog.log
fi
HOOK
			chmod +x "$hogdir/hook.sh"
			if [[ $BG_HOG -gt 0 ]]; then
				"$ERPLAB" stress --cpu "$BG_HOG" --timeout 3h -q >/dev/null 2>&1 &
				echo $! >"$hogdir/bg.pid"
			fi
			"$ERPLAB" ab --workload erp --scale "$SCALE" --users "$USERS" --duration "$AA_DURATION" --warmup 2s \
				--graceful-stop 2s --think 500ms-1500ms --seed 42 --progress 0 --aa "$AA" --rounds "$AA_ROUNDS" \
				--run-hook "$hogdir/hook.sh" --out-dir "$OUT/aa" >"$OUT/aa.txt" 2>&1
			stop_hog
			;;
		sleep)
			"$ERPLAB" ab --workload smoke --users 6 --connections 3 --think 10ms-30ms --duration 10s --seed 42 --progress 0 \
				--rounds "$ROUNDS" --variant slow=settings:examples/commit-delay-40ms.conf --out-dir "$OUT/sleep" >"$OUT/sleep.txt" 2>&1
			;;
		proxy)
			"$ERPLAB" ab --workload erp --scale "$SCALE" --users "$USERS" --duration "$DURATION" --warmup 5s \
				--think 500ms-1500ms --seed 42 --progress 0 --rounds "$ROUNDS" \
				--variant proxy=rewrite-proxy --out-dir "$OUT/proxy" >"$OUT/proxy.txt" 2>&1
			;;
		tmpfs)
			"$ERPLAB" ab --workload erp --scale "$SCALE" --users "$USERS" --duration "$DURATION" --warmup 5s \
				--think 500ms-1500ms --seed 42 --progress 0 --rounds "$ROUNDS" --temp-style 1c \
				--variant tmpfs=tmpfs-temp-tablespace --out-dir "$OUT/tmpfs" >"$OUT/tmpfs.txt" 2>&1
			;;
		settings)
			"$ERPLAB" ab --workload erp --scale "$SCALE" --users "$USERS" --duration "$DURATION" --warmup 5s \
				--think 500ms-1500ms --seed 42 --progress 0 --rounds "$ROUNDS" \
				--variant jcl=settings:examples/join-collapse-limit.conf --primary jcl=document_form:plan_ms \
				--out-dir "$OUT/settings" >"$OUT/settings.txt" 2>&1
			;;
		tmpfs-aged)
			"$ERPLAB" ab --workload erp --scale "$SCALE" --users "${STORM_USERS:-24}" --duration "$DURATION" --age "$AGE" --profile \
				--think 500ms-1500ms --seed 42 --progress 0 --rounds "$ROUNDS" --temp-style 1c --mix temp_table_storm=1 \
				--variant tmpfs=tmpfs-temp-tablespace --out-dir "$OUT/tmpfs-aged" >"$OUT/tmpfs-aged.txt" 2>&1
			;;
		*)
			echo "unknown part $part" >&2
			exit 2
			;;
		esac
	done
fi

# side DIR NAME: the comma-separated round files of configuration NAME.
side() { ls "$1"/"$2"-[0-9]*.json | sort -V | paste -sd, -; }
# decided JSON: the better/worse/higher/lower rows of a comparison.
decided() { jq -r '.[0].rows[] | select(.verdict == "better" or .verdict == "worse" or .verdict == "higher" or .verdict == "lower")
	| "    \(.subject) \(.metric): \(.verdict) (A \(.a), B \(.b), p \(.p))"' "$1"; }

# cp95 K N: the 95 % Clopper-Pearson interval of K/N in percent, by
# bisection on the binomial distribution function.
cp95() {
	awk -v k="$1" -v n="$2" 'function cdf(k, n, p, i, t, s) { t = (1 - p) ^ n; s = t
			for (i = 1; i <= k; i++) { t *= (n - i + 1) / i * p / (1 - p); s += t }; return s }
		function root(k, n, target, lo, hi, m, i) { lo = 0; hi = 1
			for (i = 0; i < 60; i++) { m = (lo + hi) / 2; if (cdf(k, n, m) > target) lo = m; else hi = m }; return m }
		BEGIN { lo = (k == 0) ? 0 : root(k - 1, n, 0.975); hi = (k == n) ? 1 : root(k, n, 0.025)
			printf "[%.1f, %.1f] %%", 100 * lo, 100 * hi }'
}
# The primary rows each remedy declares (internal/remedy/*), as --primary
# flags separated by | (a row may hold spaces); flags FAM sets the array F.
# tmpfsprof adds the profile row tmpfs declares, present with --profile only.
flags() { IFS="|" read -ra F <<<"${families[$1]}"; }
declare -A families=(
	[integral]="--primary|integral:apdex"
	[tmpfs]="--primary|integral:apdex|--primary|temp_table_storm:p95_ms|--primary|temp_table_storm:apdex"
	[tmpfsprof]="--primary|integral:apdex|--primary|temp_table_storm:p95_ms|--primary|temp_table_storm:apdex|--primary|cpu file system:share_pct:lower"
	[proxy]="--primary|or_subquery_report:p95_ms|--primary|or_subquery_report:apdex"
	[plan]="--primary|document_form:plan_ms"
)

echo "=== erplab ab calibration ($OUT)"
if [[ -d $OUT/aa ]]; then
	for fam in integral tmpfs proxy; do
		n=0 k=0 other=0
		for d in "$OUT"/aa/aa-*/; do
			[[ -e $d/same-1.json ]] || continue
			n=$((n + 1))
			flags "$fam"
			"$ERPLAB" compare --format json "${F[@]}" "$(side "$d" baseline)" "$(side "$d" same)" >"$d/primary-$fam.json"
			v=$(jq -r '.[0].primary.verdict' "$d/primary-$fam.json")
			case $v in
			"no significant difference") ;;
			better | worse | higher | lower | mixed*)
				k=$((k + 1))
				echo "  A/A $(basename "$d") primary ($fam): $v (a false verdict)"
				;;
			*)
				other=$((other + 1))
				echo "  A/A $(basename "$d") primary ($fam): $v (no verdict either way)"
				;;
			esac
		done
		echo "A/A primary verdict ($fam family: ${families[$fam]//|/ }): false in $k of $n comparisons, 95 % CI $(cp95 $k $n) (nominal 5 %); $other inconclusive or n/a"
	done
	n=0 bad=0 guarded=0
	for d in "$OUT"/aa/aa-*/; do
		[[ -e $d/same-1.json ]] || continue
		n=$((n + 1))
		"$ERPLAB" compare --format json "$(side "$d" baseline)" "$(side "$d" same)" >"$d/compare.json"
		k=$(jq '[.[0].rows[] | select(.verdict == "better" or .verdict == "worse" or .verdict == "higher" or .verdict == "lower")] | length' "$d/compare.json")
		g=$(jq '[.[0].rows[] | select(.verdict == "inconclusive: starvation differed")] | length' "$d/compare.json")
		hogs=$(grep -c "$(basename "$d") .*hog on" "$hogdir/hog.log" || true)
		printf '  A/A %s: %d decided rows, %d downgraded by the noise guard; hog during %s of its runs; %s\n' \
			"$(basename "$d")" "$k" "$g" "$hogs" "$(jq -r '.[0].noise | "starvation \((.a.contention // 0)*100|floor/100)/\((.b.contention // 0)*100|floor/100), foreign CPU \(.a.foreign_pct|floor)/\(.b.foreign_pct|floor) %, differed \(.differed) \(.why // "")"' "$d/compare.json")"
		decided "$d/compare.json"
		[[ $k -gt 0 ]] && bad=$((bad + 1))
		[[ $g -gt 0 ]] && guarded=$((guarded + 1))
	done
	echo "A/A: $bad of $n comparisons showed a better/worse row (goal: at most 1 of 20); $guarded had verdicts downgraded by the noise guard"
	# Single-run A/As: the first round of each side of the first SINGLE
	# comparisons, compared alone (one run a side never decides).
	n=0 bad=0
	for d in "$OUT"/aa/aa-*/; do
		[[ -e $d/same-1.json && $n -lt $SINGLE ]] || continue
		n=$((n + 1))
		"$ERPLAB" compare --format json "$d/baseline-1.json" "$d/same-1.json" >"$d/single.json"
		k=$(jq '[.[0].rows[] | select(.verdict == "better" or .verdict == "worse" or .verdict == "higher" or .verdict == "lower")] | length' "$d/single.json")
		printf '  single-run A/A %s: %d decided rows; %s\n' "$(basename "$d")" "$k" "$(jq -r '.[0].primary.line // .[0].summary // ""' "$d/single.json" | head -c 200)"
		decided "$d/single.json"
		[[ $k -gt 0 ]] && bad=$((bad + 1))
	done
	echo "single-run A/A: $bad of $n comparisons showed a better/worse row (goal: none)"
fi
power() { # dir variant subject label family
	local d=$OUT/$1
	[[ -e $d/$2-1.json ]] || return 0
	flags "$5"
	"$ERPLAB" compare --format json "${F[@]}" "$(side "$d" baseline)" "$(side "$d" "$2")" >"$d/compare.json"
	echo "power $4: $(jq -r '.[0] | "\(.rounds_a) and \(.rounds_b) rounds; \(.primary.line)"' "$d/compare.json")"
	jq -r '.[0].rows[] | select(.role == "primary") | "    primary \(.subject) \(.metric): A \(.a) B \(.b), delta \(.delta) \(if .ci95_low == null then "(no interval: \(.note // "not tested"))" else "[\(.ci95_low), \(.ci95_high)]" end), p \(.p): \(.verdict)"' "$d/compare.json"
	echo "  $3 rows:"
	jq -r --arg s "$3" '.[0].rows[] | select(.subject == $s) | "    \(.metric): A \(.a) B \(.b), delta \(.delta) [\(.ci95_low), \(.ci95_high)], p \(.p): \(.verdict)"' "$d/compare.json"
	jq -r '.[0].noise | "    noise: foreign CPU \(.a.foreign_pct) / \(.b.foreign_pct) %, differed \(.differed)"' "$d/compare.json"
}
power sleep slow post_order "commit_delay 40 ms (want worse)" integral
power proxy proxy or_subquery_report "rewrite-proxy (want better)" proxy
power tmpfs tmpfs temp_table_storm "tmpfs-temp-tablespace (want better)" tmpfs
power settings jcl document_form "join_collapse_limit = 1 (want plan_ms better)" plan
power tmpfs-aged tmpfs temp_table_storm "tmpfs-temp-tablespace aged $AGE (want better)" tmpfsprof
if [[ -e $OUT/tmpfs-aged/compare.json ]]; then
	jq -r '.[0].rows[] | select(.subject == "cpu file system") | "    \(.subject) \(.metric): A \(.a) B \(.b), delta \(.delta) [\(.ci95_low), \(.ci95_high)], p \(.p): \(.verdict)"' "$OUT/tmpfs-aged/compare.json"
fi
