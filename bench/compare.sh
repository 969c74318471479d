#!/usr/bin/env bash
# compare.sh [base-rev [after-rev]]: the lifecycle and the gateway overhead benchmarks of two
# versions of Settle, in the same sitting, runs alternating so both see the same machine: a
# round runs each benchmark before then after, the next after then before (ABBA), so a
# machine getting busier or quieter over the sitting favours neither. "before" is base-rev (default d849190), checked out in a
# temporary git worktree; "after" is after-rev the same way, or without it this working tree
# as it is. Each side's test binaries are built once, up front, so an edit made in the
# working tree while it runs changes nothing.
#
# Per round it runs, on each side:
#   (a) bench:   -bench Lifecycle -benchtime=5s   (a durable cluster of the bench module's)
#   (b) ops/llm: -bench GatewayOverhead/prompt=short -benchtime=3000x with
#       SETTLE_BENCH_DURABLE=0, the tests' cluster whose commits skip the WAL flush, as the
#       older benchmark always ran: the like-for-like comparison;
# and then (b) once more on the after side, durable (its default), for the latency target:
# the machine's fdatasync cost beside the gateway's added latency, and what remains beyond
# two flushes.
#
# It prints the after/before ratios of the means, and each run's figures; the raw outputs are
# kept in bench/results/compare-<time>/ (git-ignored). It removes its worktrees at the end.
#
#   bash bench/compare.sh                 # d849190 against this working tree, 3 rounds
#   SETTLE_COMPARE_RUNS=2 bash bench/compare.sh HEAD~5
#
# Environment: SETTLE_COMPARE_RUNS (rounds, default 3, at least 2), SETTLE_COMPARE_LIFECYCLE
# (the -bench pattern of (a), default Lifecycle; "none" skips it), SETTLE_COMPARE_GATEWAY_N
# (default 3000; 0 skips (b)).
set -euo pipefail

base=${1:-d849190}
after_rev=${2:-}
runs=${SETTLE_COMPARE_RUNS:-3}
lifecycle=${SETTLE_COMPARE_LIFECYCLE:-Lifecycle}
gateway_n=${SETTLE_COMPARE_GATEWAY_N:-3000}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
((runs >= 2)) || { echo "compare: SETTLE_COMPARE_RUNS must be at least 2" >&2; exit 2; }

root=$(git rev-parse --show-toplevel)
cd "$root"
base_sha=$(git rev-parse --verify "$base^{commit}")
[ -z "$after_rev" ] || after_sha=$(git rev-parse --verify "$after_rev^{commit}")
[ -f static/vendor/htmx.min.js ] || { echo "compare: static/vendor is missing: run make vendor" >&2; exit 2; }

# The temporary folder must let other users through: as root, the Postgres servers run as
# the postgres user, in folders under it.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/settle-compare-XXXXXX")
chmod 755 "$tmp"
worktrees=()
cleanup() {
	for w in "${worktrees[@]}"; do git -C "$root" worktree remove --force "$w" >/dev/null 2>&1 || true; done
	git -C "$root" worktree prune >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# checkout makes a worktree of rev at dir, with the embedded static/vendor it does not track.
checkout() {
	git -C "$root" worktree add --quiet --detach "$2" "$1"
	worktrees+=("$2")
	mkdir -p "$2/static"
	[ -d "$2/static/vendor" ] || cp -r "$root/static/vendor" "$2/static/vendor"
}

before_dir=$tmp/before
checkout "$base_sha" "$before_dir"
if [ -n "$after_rev" ]; then
	after_dir=$tmp/after
	checkout "$after_sha" "$after_dir"
	after_label=$(git rev-parse --short "$after_sha")
else
	after_dir=$root
	after_label="working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ', with changes'))"
fi

out=$root/bench/results/compare-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "compare: before = $(git rev-parse --short "$base_sha"), after = $after_label; $runs rounds; outputs in ${out#"$root"/}"

# Build each side's two test binaries once.
for side in before after; do
	dir=${side}_dir
	dir=${!dir}
	(cd "$dir" && go test -c -o "$tmp/$side-llm.test" ./ops/llm/)
	(cd "$dir/bench" && go test -c -o "$tmp/$side-bench.test" .)
done

# run side kind i: one benchmark run, its output kept.
run() {
	local side=$1 kind=$2 i=$3 dir=${1}_dir
	dir=${!dir}
	local file=$out/$side-$kind-$i.txt
	echo "  $(date +%T) $side $kind $i; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	case $kind in
	lifecycle)
		(cd "$dir/bench" && "$tmp/$side-bench.test" -test.run '^$' -test.bench "$lifecycle" \
			-test.benchtime=5s -test.timeout=60m) >"$file" 2>&1 ;;
	gateway)
		(cd "$dir/ops/llm" && SETTLE_BENCH_DURABLE=0 "$tmp/$side-llm.test" -test.run '^$' \
			-test.bench 'GatewayOverhead/prompt=short' -test.benchtime="${gateway_n}x" -test.timeout=60m) >"$file" 2>&1 ;;
	durable)
		(cd "$dir/ops/llm" && SETTLE_BENCH_DURABLE=1 "$tmp/$side-llm.test" -test.run '^$' \
			-test.bench 'GatewayOverhead/prompt=short' -test.benchtime="${gateway_n}x" -test.timeout=60m) >"$file" 2>&1 ;;
	esac || { echo "compare: $side $kind $i failed:" >&2; tail -20 "$file" >&2; exit 1; }
}

for ((i = 1; i <= runs; i++)); do
	first=before second=after
	((i % 2)) || { first=after second=before; }
	if [ "$lifecycle" != none ]; then
		run $first lifecycle "$i"
		run $second lifecycle "$i"
	fi
	if ((gateway_n > 0)); then
		run $first gateway "$i"
		run $second gateway "$i"
		run after durable "$i"
	fi
done

# metric side kind bench unit: the values of one metric, one per run, space-separated.
metric() {
	local side=$1 kind=$2 bench=$3 unit=$4
	for ((i = 1; i <= runs; i++)); do
		[ -f "$out/$side-$kind-$i.txt" ] || continue
		awk -v b="$bench" -v u="$unit" '
			$1 ~ /^Benchmark/ { n = $1; sub(/-[0-9]+$/, "", n); if (n != b) next
				for (f = 3; f <= NF; f++) if ($f == u) printf "%s ", $(f-1) }' "$out/$side-$kind-$i.txt"
	done
}

mean() { awk '{ s = 0; for (f = 1; f <= NF; f++) s += $f; if (NF) printf "%.1f", s / NF; else printf "-" }' <<<"$1"; }

# row label kind bench unit better: before and after means, their ratio and whether after is
# more than 5 % worse (better: "higher" or "lower").
row() {
	local label=$1 kind=$2 bench=$3 unit=$4 better=$5 b a
	b=$(metric before "$kind" "$bench" "$unit")
	a=$(metric after "$kind" "$bench" "$unit")
	awk -v l="$label" -v bm="$(mean "$b")" -v am="$(mean "$a")" -v bv="$b" -v av="$a" -v better="$better" 'BEGIN {
		if (bm == "-" || am == "-" || bm + 0 == 0) { printf "%-34s %10s %10s %7s\n", l, bm, am, "n/a"; exit }
		r = am / bm
		worse = (better == "higher") ? r < 0.95 : r > 1.05
		printf "%-34s %10s %10s %7.3f  %-12s before: %s| after: %s\n", l, bm, am, r, worse ? "WORSE >5%" : "within 5%", bv, av }'
}

echo
echo "after/before, means of $runs runs each (the lifecycle in lifecycles/s, higher is better;"
echo "the gateway in microseconds added to a direct call of the fake, non-durable cluster, lower is better)"
printf "%-34s %10s %10s %7s  %s\n" "" before after ratio ""
row "lifecycle settle (/s)" lifecycle BenchmarkLifecycle/settle lifecycles/s higher
row "lifecycle settle, no group (/s)" lifecycle BenchmarkLifecycle/settle_nogroup lifecycles/s higher
row "lifecycle naive, control (/s)" lifecycle BenchmarkLifecycle/naive lifecycles/s higher
row "gateway added p50 (us)" gateway BenchmarkGatewayOverhead/prompt=short added_p50_us lower
row "gateway added p99 (us)" gateway BenchmarkGatewayOverhead/prompt=short added_p99_us lower
row "gateway added ttft p50 (us)" gateway BenchmarkGatewayOverhead/prompt=short added_ttft_p50_us lower
row "gateway added ttft p99 (us)" gateway BenchmarkGatewayOverhead/prompt=short added_ttft_p99_us lower
row "direct call p50, control (us)" gateway BenchmarkGatewayOverhead/prompt=short direct_p50_us lower
row "gateway alloc (B/call)" gateway BenchmarkGatewayOverhead/prompt=short gateway_alloc_B/call lower

echo
echo "after, durable cluster (fsync on), per run: microseconds; fdatasync is pg_test_fsync's"
echo "figure for one 8 kB write, measured in the same run; beyond = added minus 2 x fdatasync"
printf "%-4s %10s %10s %10s %12s %12s %10s\n" run fdatasync "added p50" "added p99" "p50 beyond" "p99 beyond" "syncs/call"
for ((i = 1; i <= runs; i++)); do
	f=$out/after-durable-$i.txt
	[ -f "$f" ] || continue
	v() { awk -v u="$1" '$1 ~ /^BenchmarkGatewayOverhead\/prompt=short/ { for (f = 3; f <= NF; f++) if ($f == u) printf "%s", $(f-1) }' "$f"; }
	printf "%-4s %10s %10s %10s %12s %12s %10s\n" "$i" "$(v fdatasync_8kB_us)" "$(v added_p50_us)" "$(v added_p99_us)" \
		"$(v added_p50_beyond_2_fdatasync_us)" "$(v added_p99_beyond_2_fdatasync_us)" "$(v wal_syncs/gateway_call)"
done
echo "target: p99 beyond two flushes <= 1000 us"
