package main

import (
	"os"
	"os/exec"
	"strings"
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

	a := &phase{sent: 2, errors: map[string]int{"HTTP 500": 1}, plain: ms(3), cpu: time.Second, ownCPU: time.Second, peakRSS: 10}
	b := &phase{sent: 3, errors: map[string]int{"HTTP 500": 1, classTransport: 1}, plain: ms(1), stream: ms(2), cpu: time.Second, ownCPU: 2 * time.Second, peakRSS: 20}
	var m *phase
	m = m.add(a).add(b)
	if m.sent != 5 || m.errors["HTTP 500"] != 2 || m.errors[classTransport] != 1 || m.cpu != 2*time.Second || m.ownCPU != 3*time.Second || m.peakRSS != 20 ||
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
	for burn := ownCPU(); ownCPU()-burn < 50*time.Millisecond; {
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
