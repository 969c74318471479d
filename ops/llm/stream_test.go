package llm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/racedetect"
)

// An event's id line goes before its data line, after the event name of the APIs that name
// their events, so each client still reads the name first.
func TestEventIDGoesBeforeTheData(t *testing.T) {
	ev := streamEvent{attempt: 2, n: 17, data: []byte(`{"type":"response.output_text.delta","delta":"hi"}`)}
	if got, want := string(ev.appendWithID(nil, sse(ev.data))), "id: 2-17\ndata: "+string(ev.data)+"\n\n"; got != want {
		t.Fatalf("chat frame %q, want %q", got, want)
	}
	if got, want := string(ev.appendWithID(nil, typedSSE(ev.data))), "event: response.output_text.delta\nid: 2-17\ndata: "+string(ev.data)+"\n\n"; got != want {
		t.Fatalf("typed frame %q, want %q", got, want)
	}
}

// A stream resumes after the event Last-Event-ID names, and from its first event when the id
// names none of its events: another attempt's, or no id of Settle's.
func TestResumeFrom(t *testing.T) {
	evs := []streamEvent{{attempt: 2, n: 1}, {attempt: 2, n: 2}, {attempt: 2, n: 3}}
	for _, c := range []struct {
		last  string
		from  int
		after string
	}{
		{"2-2", 2, "2-2"}, {"2-3", 3, "2-3"}, {"", 0, ""}, {"1-2", 0, ""}, {"2-4", 0, ""}, {"2-x", 0, ""}, {"chatcmpl-1", 0, ""},
	} {
		if from, after := resumeFrom(evs, c.last); from != c.from || after != c.after {
			t.Errorf("Last-Event-ID %q: from %d after %q, want %d %q", c.last, from, after, c.from, c.after)
		}
	}
}

// The events stored with an answer come back as they were relayed, byte for byte; events
// that are not JSON are not stored (the replay then rebuilds the stream from the answer).
func TestStoredEventsComeBackAsTheyWere(t *testing.T) {
	evs := []streamEvent{{attempt: 3, n: 1, data: []byte(`{"b": 1,  "a":"é\u00e9"}`)}, {attempt: 3, n: 2, data: []byte(`{"x":[ ]}`)}}
	back, err := decodeEvents(encodeEvents(evs))
	if err != nil || len(back) != 2 {
		t.Fatalf("decoded %v, %v", back, err)
	}
	for i, e := range back {
		if e.attempt != 3 || e.n != i+1 || !bytes.Equal(e.data, evs[i].data) {
			t.Fatalf("event %d came back as %+v %s", i, e, e.data)
		}
	}
	if doc := encodeEvents(append(evs, streamEvent{attempt: 3, n: 3, data: []byte("[DONE")})); doc != nil {
		t.Fatalf("stored %s", doc)
	}
	if doc := encodeEvents(nil); doc != nil {
		t.Fatalf("stored %s for no events", doc)
	}
}

// The events an answer stores are encoded where the flight holds them, with one allocation
// for the document, rather than copied out first; a flight that holds another attempt's
// events as well stores only the answering attempt's.
func TestRecordedEventsAreEncodedWithoutACopy(t *testing.T) {
	f := &flight{}
	for a := 1; a <= 2; a++ {
		for n := 1; n <= 20; n++ {
			f.add(streamEvent{attempt: a, n: n, data: []byte(`{"n":1}`)})
		}
	}
	want := `{"attempt":2,"events":[` + strings.TrimSuffix(strings.Repeat(`{"n":1},`, 20), ",") + `]}`
	if got := string(f.recorded(2)); got != want {
		t.Fatalf("recorded %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(50, func() { _ = f.recorded(2) }); n > 1 && !racedetect.Enabled {
		t.Errorf("recording 20 events took %.0f allocations, want 1: they were copied first", n)
	}
	f.add(streamEvent{attempt: 1, n: 21, data: []byte(`{"late":true}`)})
	if got := string(f.recorded(2)); got != want {
		t.Fatalf("with another attempt's event after them, recorded %s, want %s", got, want)
	}
}
