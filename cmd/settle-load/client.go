package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// call is one request an intent sends.
type call struct {
	route  string // the report's route: refund, chat, chat-stream, job
	path   string
	body   []byte
	key    string // the Idempotency-Key, if any
	stream bool
	tenant int // which of the run's tenants sends it
}

// answer is what one request got back.
type answer struct {
	status int
	class  string
	code   string         // a problem's code
	opID   string         // Settle-Operation-Id, or the body's operation_id
	id     string         // the completion's id (chat) or the job's id
	body   map[string]any // a JSON body
}

// The answer classes of the report.
const (
	class2xx        = "2xx"
	classInFlight   = "409 in flight"
	class409Other   = "409 other"
	class422        = "422"
	class429        = "429"
	class5xx        = "5xx"
	class4xxOther   = "4xx other"
	classTransport  = "transport"
	classStreamCut  = "stream cut"
	classStreamFail = "stream error"
)

var classes = []string{class2xx, classInFlight, class409Other, class422, class429, class5xx, class4xxOther,
	classTransport, classStreamCut, classStreamFail}

// classOf names the class of an answer: its status and problem code, or the transport
// error that kept it from arriving.
func classOf(status int, code string, err error) string {
	switch {
	case err != nil:
		return classTransport
	case status/100 == 2:
		return class2xx
	case status == http.StatusConflict && code == "idempotency_key_in_use":
		return classInFlight
	case status == http.StatusConflict:
		return class409Other
	case status == http.StatusUnprocessableEntity:
		return class422
	case status == http.StatusTooManyRequests:
		return class429
	case status >= 500:
		return class5xx
	default:
		return class4xxOther
	}
}

// send sends c to the replica of slot, or the other when that one is known to be down, as a
// load balancer with a passive health check would. A transport error marks the replica
// down for two seconds and the same request goes to the other, up to twice: a client
// retrying with the same arguments is what Settle is for.
func (d *driver) send(ctx context.Context, c call, slot int) answer {
	var a answer
	for try := 0; try < 3; try++ {
		if d.isDown(slot) {
			slot = 1 - slot
		}
		a = d.sendOnce(ctx, c, slot)
		if a.class != classTransport || ctx.Err() != nil {
			return a
		}
		d.markDown(slot)
		slot = 1 - slot
		time.Sleep(100 * time.Millisecond)
	}
	return a
}

// sendOnce sends c to one replica and records the answer in the report's figures.
func (d *driver) sendOnce(ctx context.Context, c call, slot int) answer {
	r := d.w.slot(slot)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url()+c.path, bytes.NewReader(c.body))
	if err != nil {
		return answer{class: classTransport}
	}
	req.Header.Set("Authorization", "Bearer "+d.w.tokens[c.tenant])
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	start := time.Now()
	resp, err := d.client.Do(req)
	var a answer
	if err != nil {
		a = answer{class: classTransport}
	} else {
		a = readAnswer(resp, c.stream)
		resp.Body.Close()
	}
	d.record(c.route, a.class, start, time.Now())
	return a
}

// readAnswer reads an answer to its end: a JSON body, a problem, or a stream of chunks,
// whose end must be [DONE].
func readAnswer(resp *http.Response, stream bool) answer {
	a := answer{status: resp.StatusCode, opID: resp.Header.Get("Settle-Operation-Id")}
	if stream && resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.class, a.id = readStream(resp.Body)
		return a
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.class = classTransport
		return a
	}
	_ = json.Unmarshal(raw, &a.body)
	a.code, _ = a.body["code"].(string)
	a.class = classOf(resp.StatusCode, a.code, nil)
	if a.opID == "" {
		a.opID, _ = a.body["operation_id"].(string)
	}
	a.id, _ = a.body["id"].(string)
	if job, ok := a.body["job_id"].(string); ok {
		a.id = job
	}
	return a
}

// readStream reads server-sent events to [DONE] and returns the class of the stream and the
// completion's id its chunks carry.
func readStream(body io.Reader) (class, id string) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return class2xx, id
		}
		var chunk struct {
			ID    string          `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(data), &chunk) == nil {
			if len(chunk.Error) > 0 {
				return classStreamFail, id
			}
			if id == "" {
				id = chunk.ID
			}
		}
	}
	return classStreamCut, id
}

func (d *driver) isDown(slot int) bool { return time.Now().UnixNano() < d.downUntil[slot].Load() }

func (d *driver) markDown(slot int) {
	d.downUntil[slot].Store(time.Now().Add(2 * time.Second).UnixNano())
}

// record adds one request to the figures: its latency by route, its class, and whether it
// was in flight around the kill.
func (d *driver) record(route, class string, start, end time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.routes[route]
	if s == nil {
		s = &routeStats{classes: map[string]int{}}
		d.routes[route] = s
	}
	s.classes[class]++
	if class != classTransport {
		s.latencies = append(s.latencies, end.Sub(start))
	}
	if start.Before(d.start.Add(d.cfg.duration)) {
		d.inWindow++
	}
	if from, to := d.killWindow(); !from.IsZero() && start.Before(to) && end.After(from) {
		d.aroundKill[class]++
	}
}
