package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The gateway benchmark's figures come from these; the run itself needs Postgres and the
// binary, and is `make bench-gateway`.
func TestGatewayFiguresAndStreams(t *testing.T) {
	start := time.Now()
	apis, err := parseAPIs("chat,responses,messages,embeddings")
	if err != nil {
		t.Fatal(err)
	}
	chat, responses, messages, embeddings := apis[0], apis[1], apis[2], apis[3]
	if embeddings.streams() || !chat.streams() || !responses.streams() || !messages.streams() {
		t.Error("embeddings stream, or another API does not")
	}
	// Each API's streams as its provider and Settle end them: whole, cut, or with an error
	// event (Settle's own, for a stream that began and then failed).
	for _, c := range []struct {
		api             *gatewayAPI
		whole, cut, err string
	}{
		{chat, "data: {\"id\":\"chatcmpl-1\"}\n\ndata: [DONE]\n\n", "data: {\"id\":\"chatcmpl-1\"}\n\n",
			"data: {\"id\":\"c\"}\n\ndata: {\"error\":{\"message\":\"x\"}}\n\n"},
		{responses, "event: response.created\ndata: {\"type\":\"response.created\"}\n\nevent: response.completed\ndata: {\"response\":{},\"type\":\"response.completed\"}\n\n",
			"event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
			"event: response.created\ndata: {\"type\":\"response.created\"}\n\nevent: error\ndata: {\"code\":\"upstream_cut\",\"message\":\"x\",\"param\":null,\"type\":\"error\"}\n\n"},
		{messages, "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
			"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: error\ndata: {\"error\":{\"message\":\"x\",\"type\":\"api_error\"},\"type\":\"error\"}\n\n"},
	} {
		if first, fail := firstChunk(strings.NewReader(c.whole), start, c.api.end); fail != "" || first <= 0 {
			t.Errorf("%s: a whole stream reads as %q after %s", c.api.name, fail, first)
		}
		if _, fail := firstChunk(strings.NewReader(c.cut), start, c.api.end); fail != classStreamCut {
			t.Errorf("%s: a stream cut short reads as %q", c.api.name, fail)
		}
		if _, fail := firstChunk(strings.NewReader(c.err), start, c.api.end); fail != classStreamFail {
			t.Errorf("%s: a stream ending in an error reads as %q", c.api.name, fail)
		}
	}

	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	if got := quantiles(ms(50, 51, 52), nil, true); got != "51.00 52.00 52.00" {
		t.Errorf("absolute quantiles = %q", got)
	}
	if got := quantiles(ms(53, 55, 60), ms(50, 51, 52), false); got != "+4.00 +8.00 +8.00" {
		t.Errorf("added quantiles = %q", got)
	}

	a := &phase{sent: 2, errors: map[string]int{"HTTP 500": 1}, plain: ms(3), cpu: time.Second, peakRSS: 10}
	b := &phase{sent: 3, errors: map[string]int{"HTTP 500": 1, classTransport: 1}, plain: ms(1), stream: ms(2), cpu: time.Second, peakRSS: 20}
	var m *phase
	m = m.add(a).add(b)
	if m.sent != 5 || m.errors["HTTP 500"] != 2 || m.errors[classTransport] != 1 || m.cpu != 2*time.Second || m.peakRSS != 20 ||
		len(m.plain) != 2 || m.plain[0] != time.Millisecond || len(m.stream) != 1 {
		t.Errorf("two turns add up to %+v", m)
	}
	if got := failures(m.errors); got != "2 HTTP 500, 1 transport" {
		t.Errorf("failures = %q", got)
	}

	// After 50 ms of work, this process's CPU time reads as positive (/proc counts in
	// hundredths of a second), its parent as the one the kernel names. The work is measured
	// in CPU time the kernel reports through getrusage, not in time on the clock: on a
	// machine busy with other work, 50 ms of waiting may give this process no CPU at all.
	for burn := selfCPU(t); selfCPU(t)-burn < 50*time.Millisecond; {
	}
	ppid, cpu, ok := procStat(os.Getpid())
	if !ok || ppid != os.Getppid() || cpu <= 0 {
		t.Errorf("procStat(self) = %d, %s, %v; parent %d", ppid, cpu, ok, os.Getppid())
	}
	self, _ := os.FindProcess(os.Getpid())
	r := &replica{cmd: &exec.Cmd{Process: self}}
	if r.cpu() <= 0 || r.runQueueWait() < 0 {
		t.Errorf("this process as a replica: cpu %s, run-queue wait %s", r.cpu(), r.runQueueWait())
	}
	// Since the machine started, some task has waited for a CPU at some point.
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && cpuPressure() <= 0 {
		t.Errorf("cpuPressure() = %s", cpuPressure())
	}
}

// selfCPU is the processor time, user and system, this process has used so far, as
// getrusage reports it.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestGatewayFlags(t *testing.T) {
	t.Setenv("RATES", "")
	t.Setenv("DURATION", "")
	t.Setenv("APIS", "")
	c, err := parseGatewayFlags(nil)
	if err != nil || len(c.rates) != 3 || c.rates[0] != 100 || c.rates[2] != 500 || c.duration != time.Minute || c.rounds != 1 {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	c, err = parseGatewayFlags([]string{"-rates", "50, 200", "-duration", "10s"})
	if err != nil || len(c.rates) != 2 || c.rates[1] != 200 || c.duration != 10*time.Second {
		t.Errorf("-rates 50,200 -duration 10s: %+v, %v", c, err)
	}
	if len(c.apis) != 4 || c.apis[0].name != "chat" || c.apis[3].route != "/v1/embeddings" {
		t.Errorf("default APIs: %v", c.apis)
	}
	c, err = parseGatewayFlags([]string{"-apis", "messages, chat"})
	if err != nil || len(c.apis) != 2 || c.apis[0].route != "/v1/messages" || c.apis[1].route != "/v1/chat/completions" {
		t.Errorf("-apis messages,chat: %v, %v", c.apis, err)
	}
	for _, bad := range [][]string{{"-rates", "100,x"}, {"-rates", "0"}, {"-rates", "100,100"}, {"-rounds", "0"}, {"-chunks", "0"},
		{"-apis", "chat,completions"}, {"-apis", "chat,chat"}, {"-apis", ""}} {
		if _, err := parseGatewayFlags(bad); err == nil {
			t.Errorf("%v was taken", bad)
		}
	}
}

// With -statements, each of Settle's phases reports what Postgres ran per request and its
// costliest statements; the turns of one rate add up statement by statement.
func TestGatewayStatementsPerRequest(t *testing.T) {
	settle := &target{name: "settle"}
	chat := &gatewayAPI{name: "chat"}
	turn := func(open, finish int64) *statements {
		return &statements{calls: open + finish, exec: time.Duration(open+3*finish) * 100 * time.Microsecond, plan: time.Duration(open) * 50 * time.Microsecond,
			walBytes: float64(open*500 + finish*4000),
			records:  walRecords{"Btree/INSERT_LEAF": {count: 10 * open}, "Heap/HOT_UPDATE": {count: finish}, "Heap/INSERT": {count: 2 * open, fpiBytes: 8192}},
			each: []statement{{query: "WITH ins AS ( INSERT INTO operations", calls: open, exec: time.Duration(open) * 100 * time.Microsecond, walBytes: float64(open * 500)},
				{query: "WITH up AS ( UPDATE operations", calls: finish, exec: time.Duration(finish) * 300 * time.Microsecond, walBytes: float64(finish * 4000)}}}
	}
	p := (&phase{target: settle, api: chat, rate: 300, sent: 100, stmts: turn(100, 100)}).add(
		&phase{target: settle, api: chat, rate: 300, sent: 100, errors: map[string]int{}, stmts: turn(100, 100)})
	var out strings.Builder
	printStatements(&out, []*phase{p, {target: &target{name: "proxy"}, api: chat, rate: 300, sent: 100}})
	got := out.String()
	for _, want := range []string{
		"300/s chat: 2.00 statements, 0.400 ms executing, 0.050 ms planning, 4.4 kB of WAL per request",
		"10.0 index entries, 0.0 page splits, 2.0 row inserts, 0.0 updates, 1.0 heap-only updates, 0.00 commits; 82 B of full-page images",
		"most frequent: Btree/INSERT_LEAF 10.00, Heap/INSERT 2.00, Heap/HOT_UPDATE 1.00",
		" 1.00 per request,    300 µs and   4000 B of WAL each: WITH up AS ( UPDATE operations",
		" 1.00 per request,    100 µs and    500 B of WAL each: WITH ins AS ( INSERT INTO operations",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the statements' report lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "UPDATE operations") > strings.Index(got, "INSERT INTO operations") {
		t.Errorf("the costliest statement is not first:\n%s", got)
	}
	if strings.Contains(got, "proxy") {
		t.Errorf("a phase without counts is reported:\n%s", got)
	}
}
