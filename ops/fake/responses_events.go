package fake

import "encoding/json"

// object is the response in OpenAI's shape with the given status; a completed response
// carries its output and usage. The caller holds run.mu or owns the run alone.
func (run *responseRun) object(status string) obj {
	req := run.req
	o := obj{
		"id": run.gen.ID, "object": "response", "created_at": run.created.Unix(), "status": status,
		"background": run.background, "error": nil, "incomplete_details": nil, "instructions": nil,
		"max_output_tokens": nil, "max_tool_calls": nil, "model": run.gen.Model, "output": []obj{},
		"parallel_tool_calls": true, "previous_response_id": nullable(req.PreviousResponseID),
		"reasoning": obj{"effort": nil, "summary": nil}, "service_tier": "default", "store": run.stored,
		"temperature": 1.0, "text": obj{"format": obj{"type": "text"}, "verbosity": "medium"},
		"tool_choice": "auto", "tools": []obj{}, "top_p": 1.0, "truncation": "disabled",
		"usage": nil, "user": nil, "metadata": metadataObject(run.gen.Metadata), "completed_at": nil,
		"prompt_cache_key": nil, "safety_identifier": nil,
	}
	if req.Instructions != nil {
		o["instructions"] = *req.Instructions
	}
	if req.MaxOutputTokens != nil {
		o["max_output_tokens"] = *req.MaxOutputTokens
	}
	if req.Temperature != nil {
		o["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		o["top_p"] = *req.TopP
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		o["tools"] = req.Tools
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		o["tool_choice"] = req.ToolChoice
	}
	if status == "completed" {
		o["output"] = []obj{run.item("completed", true)}
		o["usage"] = responsesUsage(run.gen)
		o["completed_at"] = run.created.Unix()
	}
	return o
}

// item is the run's one output item: a message, or a function call when the request
// forced one; whole says its text or arguments are complete.
func (run *responseRun) item(status string, whole bool) obj {
	c := run.out
	if c.toolName != "" {
		args := ""
		if whole {
			args = c.toolArgs
		}
		return obj{"id": run.itemID, "type": "function_call", "status": status, "call_id": c.toolID,
			"name": c.toolName, "arguments": args}
	}
	content := []obj{}
	if whole {
		content = []obj{run.wholeText()}
	}
	return obj{"id": run.itemID, "type": "message", "status": status, "role": "assistant", "content": content}
}

func textPart(text string) obj {
	return obj{"type": "output_text", "text": text, "annotations": []obj{}, "logprobs": []obj{}}
}

// wholeText is the run's complete text part, with its citations.
func (run *responseRun) wholeText() obj {
	p := textPart(run.out.content)
	if len(run.cites) > 0 {
		p["annotations"] = run.cites
	}
	return p
}

// sandboxCitations are the annotations of an answer whose request gave a code_interpreter
// tool: OpenAI cites the file the code wrote in the call's container with a
// container_file_citation naming the container and the file by their ids, which a client
// that hands the output item back in a later request's input sends again. Other requests
// cite nothing.
func sandboxCitations(tools json.RawMessage, textLen int) []obj {
	var list []struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(tools, &list) // tools that do not decode give no tool
	for _, t := range list {
		if t.Type == "code_interpreter" {
			return []obj{{"type": "container_file_citation", "container_id": newID("cntr_"), "file_id": newID("cfile_"),
				"filename": "result.csv", "start_index": 0, "end_index": textLen}}
		}
	}
	return nil
}

func responsesUsage(g Generation) obj {
	return obj{"input_tokens": g.PromptTokens, "input_tokens_details": obj{"cached_tokens": g.CachedTokens},
		"output_tokens": g.CompletionTokens, "output_tokens_details": obj{"reasoning_tokens": 0},
		"total_tokens": g.PromptTokens + g.CompletionTokens}
}

// steps are the events of the run after response.created, in the order OpenAI sends them,
// each as a function that sends it.
func (run *responseRun) steps() []func() {
	at := func(o obj) obj {
		o["item_id"], o["output_index"] = run.itemID, 0
		return o
	}
	steps := []func(){
		func() {
			run.push("response.in_progress", obj{"response": run.object("in_progress")}, "in_progress", nil)
		},
		func() {
			run.emit("response.output_item.added", obj{"output_index": 0, "item": run.item("in_progress", false)})
		},
	}
	c := run.out
	if c.toolName != "" {
		for _, tok := range c.tokens {
			steps = append(steps, func() { run.emit("response.function_call_arguments.delta", at(obj{"delta": tok})) })
		}
		steps = append(steps, func() {
			run.emit("response.function_call_arguments.done", at(obj{"arguments": c.toolArgs, "name": c.toolName}))
		})
	} else {
		part := func(o obj) obj {
			o["content_index"] = 0
			return at(o)
		}
		steps = append(steps, func() { run.emit("response.content_part.added", part(obj{"part": textPart("")})) })
		for _, tok := range c.tokens {
			steps = append(steps, func() {
				run.emit("response.output_text.delta", part(obj{"delta": tok, "logprobs": []obj{}}))
			})
		}
		steps = append(steps,
			func() { run.emit("response.output_text.done", part(obj{"text": c.content, "logprobs": []obj{}})) },
			func() { run.emit("response.content_part.done", part(obj{"part": run.wholeText()})) })
	}
	return append(steps,
		func() {
			run.emit("response.output_item.done", obj{"output_index": 0, "item": run.item("completed", true)})
		},
		func() {
			o := run.object("completed")
			run.push("response.completed", obj{"response": o}, "completed", o)
		})
}
