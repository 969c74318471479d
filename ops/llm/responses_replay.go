package llm

import (
	"encoding/json"
	"fmt"
	"maps"
)

// replay turns a stored response back into the events of its stream, as the Responses API
// sends them: response.created and response.in_progress with the response as it began, each
// output item added, its text (or a function call's arguments) in one delta and done, the
// item done, then response.completed (or response.incomplete) with the whole response.
// Events are numbered from 0 in sequence_number.
func (responsesAPI) replay(stored []byte, _ *request) ([][]byte, error) {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(stored, &resp); err != nil {
		return nil, fmt.Errorf("decode stored response: %w", err)
	}
	var output []json.RawMessage
	if raw, ok := resp["output"]; ok {
		if err := json.Unmarshal(raw, &output); err != nil {
			return nil, fmt.Errorf("decode stored output: %w", err)
		}
	}
	r := &replayer{}
	begun := maps.Clone(resp)
	begun["status"], begun["output"], begun["usage"] = json.RawMessage(`"in_progress"`), json.RawMessage(`[]`), json.RawMessage(`null`)
	if _, ok := begun["completed_at"]; ok {
		begun["completed_at"] = json.RawMessage(`null`)
	}
	r.emit("response.created", map[string]any{"response": begun})
	r.emit("response.in_progress", map[string]any{"response": begun})
	for i, item := range output {
		if err := r.item(i, item); err != nil {
			return nil, err
		}
	}
	last := "response.completed"
	if string(resp["status"]) == `"incomplete"` {
		last = "response.incomplete"
	}
	r.emit(last, map[string]any{"response": json.RawMessage(stored)})
	return r.out, r.err
}

// replayer numbers and encodes the events of a replayed response.
type replayer struct {
	out [][]byte
	err error
}

func (r *replayer) emit(typ string, fields map[string]any) {
	fields["type"], fields["sequence_number"] = typ, len(r.out)
	b, err := json.Marshal(fields)
	if err != nil && r.err == nil {
		r.err = err
	}
	r.out = append(r.out, b)
}

// item sends the events of output item i: added as it began, its content, done as stored.
func (r *replayer) item(i int, raw json.RawMessage) error {
	var it struct {
		Type      string            `json:"type"`
		ID        string            `json:"id"`
		Arguments string            `json:"arguments"`
		Content   []json.RawMessage `json:"content"`
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &it); err != nil {
		return fmt.Errorf("decode output item %d: %w", i, err)
	}
	_ = json.Unmarshal(raw, &fields)
	begun := maps.Clone(fields)
	if _, ok := begun["status"]; ok {
		begun["status"] = json.RawMessage(`"in_progress"`)
	}
	at := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"] = it.ID, i
		return m
	}
	switch it.Type {
	case "message":
		begun["content"] = json.RawMessage(`[]`)
		r.emit("response.output_item.added", map[string]any{"output_index": i, "item": begun})
		for j, part := range it.Content {
			r.part(j, part, at)
		}
	case "function_call":
		begun["arguments"] = json.RawMessage(`""`)
		r.emit("response.output_item.added", map[string]any{"output_index": i, "item": begun})
		r.emit("response.function_call_arguments.delta", at(map[string]any{"delta": it.Arguments}))
		r.emit("response.function_call_arguments.done", at(map[string]any{"arguments": it.Arguments}))
	default:
		r.emit("response.output_item.added", map[string]any{"output_index": i, "item": raw})
	}
	r.emit("response.output_item.done", map[string]any{"output_index": i, "item": raw})
	return nil
}

// part sends the events of content part j of a message: its text, or its refusal, in one
// delta.
func (r *replayer) part(j int, raw json.RawMessage, at func(map[string]any) map[string]any) {
	var p struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	_ = json.Unmarshal(raw, &p)
	in := func(m map[string]any) map[string]any {
		m["content_index"] = j
		return at(m)
	}
	switch p.Type {
	case "output_text":
		r.emit("response.content_part.added", in(map[string]any{"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}))
		r.emit("response.output_text.delta", in(map[string]any{"delta": p.Text, "logprobs": []any{}}))
		r.emit("response.output_text.done", in(map[string]any{"text": p.Text, "logprobs": []any{}}))
	case "refusal":
		r.emit("response.content_part.added", in(map[string]any{"part": map[string]any{"type": "refusal", "refusal": ""}}))
		r.emit("response.refusal.delta", in(map[string]any{"delta": p.Refusal}))
		r.emit("response.refusal.done", in(map[string]any{"refusal": p.Refusal}))
	default:
		r.emit("response.content_part.added", in(map[string]any{"part": raw}))
	}
	r.emit("response.content_part.done", in(map[string]any{"part": raw}))
}
