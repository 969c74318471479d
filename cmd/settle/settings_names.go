package main

import (
	"regexp"
	"slices"
	"strings"
)

// notSettings are the project's own SETTLE_ variables that no settle command reads: knobs
// of the tests, the benchmarks and the harnesses around them. They are exported to a whole
// test or benchmark run (CI sets SETTLE_TEST_STRICT for every package), and the settle
// processes those runs start inherit them, so a command must accept them without reading
// them. TestEverySettleVariableOfTheRepositoryIsKnown (cmd/settle/settings_names_test.go)
// fails when a file of the repository names one missing here or from the table.
var notSettings = map[string]string{
	"SETTLE_TEST_STRICT": "CI and `make test` set it so a test whose program is missing fails instead of skipping",
	"SETTLE_UPDATE_DOCS": "the test of docs/configuration.md rewrites the generated table with it",

	"SETTLE_BENCH_DURABLE":       "the LLM benchmarks (bench/compare.sh) choose a cluster that flushes its WAL or not",
	"SETTLE_BENCH_HISTORY":       "the history benchmark's size, in bench/",
	"SETTLE_BENCH_INSIGHTS_ROWS": "the insights benchmark's size, in bench/",
	"SETTLE_BENCH_PG_SETTINGS":   "the benchmarks' cluster settings, in bench/",
	"SETTLE_BENCH_REFUNDS":       "the reconcile benchmark's size, in bench/",
	"SETTLE_BENCH_ROWS":          "the queue benchmark's size, in bench/",
	"SETTLE_COMPARE_RUNS":        "bench/compare.sh's rounds",
	"SETTLE_COMPARE_LIFECYCLE":   "bench/compare.sh's lifecycle benchmark pattern",
	"SETTLE_COMPARE_GATEWAY_N":   "bench/compare.sh's gateway benchmark size",

	"SETTLE_CHAOS_SEED":  "the chaos harness (`make chaos`) replays one seed",
	"SETTLE_CHAOS_SEEDS": "the chaos harness's number of seeds",
	"SETTLE_CHAOS_LANES": "the chaos harness's parallel lanes",

	"SETTLE_SAMPLE_RECEIVER_DB":    "the tests of ops/jobs hand them to their sample receiver process",
	"SETTLE_SAMPLE_RECEIVER_ADDR":  "the tests of ops/jobs hand them to their sample receiver process",
	"SETTLE_SAMPLE_RECEIVER_CRASH": "the tests of ops/jobs hand them to their sample receiver process",
}

// checkVariableNames refuses a SETTLE_ variable of env (as os.Environ gives it) that is
// neither a setting nor one of notSettings: a misspelt setting is otherwise ignored and its
// default applies, such as a retention of 400 days that deletes for good what the operator
// meant to keep. A setting of another command is accepted: one environment (a systemd
// EnvironmentFile, a Kubernetes ConfigMap) usually serves serve, migrate and the
// administration commands alike. Only SETTLE_ is checked: other prefixes (STRIPE_) are
// shared with other tools.
func checkVariableNames(env []string) error {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SETTLE_") || notSettings[name] != "" || isSetting(name) || serviceLink.MatchString(name) {
			continue
		}
		if near := nearestSetting(name); near != "" {
			return usagef("%s is no setting; did you mean %s?", name, near)
		}
		return usagef("%s is no setting; 'settle help' lists them", name)
	}
	return nil
}

// serviceLink matches the variables Kubernetes gives each pod for every Service of its
// namespace (<NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT[_<port name>], <NAME>_PORT and
// <NAME>_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR]): a Service named "settle" or
// "settle-worker" names them SETTLE_..., in Settle's own pods among others, and no setting
// ends so.
var serviceLink = regexp.MustCompile(`^SETTLE(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$`)

// isSetting says whether a variable of the table is called name.
func isSetting(name string) bool {
	return slices.ContainsFunc(settings, func(s *setting) bool { return s.Name == name })
}

// nearestSetting is the SETTLE_ setting whose name is fewest edits away from name, when
// that is few enough to be a slip of the fingers (at most a third of the name's letters
// after the prefix); empty otherwise.
func nearestSetting(name string) string {
	best, bestDist := "", (len(name)-len("SETTLE_"))/3+1
	for _, s := range table() {
		if !strings.HasPrefix(s.Name, "SETTLE_") {
			continue
		}
		if d := editDistance(name, s.Name); d < bestDist {
			best, bestDist = s.Name, d
		}
	}
	return best
}

// editDistance is the number of single-letter insertions, deletions and substitutions
// that turn a into b (Levenshtein's distance).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// lookup is the value of each variable of env, the first when one is named twice, as
// os.Getenv reads it.
func lookup(env []string) func(string) string {
	return func(key string) string {
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok && k == key {
				return v
			}
		}
		return ""
	}
}
