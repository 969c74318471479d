package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// StoreMode says whether Settle asks the provider to store each completion (store: true,
// tagged with the operation's id), so an attempt whose answer was lost can be looked up.
type StoreMode string

// The store modes (SETTLE_LLM_STORE).
const (
	// StoreAuto asks the provider once whether it lists stored completions, and remembers.
	StoreAuto StoreMode = "auto"
	// StoreOn always sends store: true.
	StoreOn StoreMode = "on"
	// StoreOff never does: calls cannot be looked up.
	StoreOff StoreMode = "off"
)

// Valid reports whether m is a known mode ("" is auto).
func (m StoreMode) Valid() bool { return m == "" || m == StoreAuto || m == StoreOn || m == StoreOff }

// maxMetadata is how many metadata pairs a completion may carry at OpenAI.
const maxMetadata = 16

var _ llm.StoredCompletions = (*Client)(nil)

// storeState is what the client knows of the provider's store; the probe runs once.
type storeState struct {
	mu    sync.Mutex
	state llm.Store
}

// StoreState implements llm.StoredCompletions. In auto mode the first call asks the provider
// for one stored completion: an answer means it stores them; 400, 404, 405 or 501 means it
// does not, remembered for good; anything else (it is down) is asked again next time.
func (o *Client) StoreState(ctx context.Context) llm.Store {
	switch o.cfg.Store {
	case StoreOn:
		return llm.StoreOn
	case StoreOff:
		return llm.StoreOff
	}
	o.store.mu.Lock()
	defer o.store.mu.Unlock()
	if o.store.state != llm.StoreUnknown {
		return o.store.state
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := o.sdk.Chat.Completions.List(ctx, sdk.ChatCompletionListParams{Limit: sdk.Int(1)}, option.WithMaxRetries(0))
	switch {
	case err == nil:
		o.store.state = llm.StoreOn
	case refusesStore(err):
		o.store.state = llm.StoreOff
	}
	return o.store.state
}

// storeOff remembers that the provider refused store on a send (auto mode only).
func (o *Client) storeOff() {
	o.store.mu.Lock()
	o.store.state = llm.StoreOff
	o.store.mu.Unlock()
}

func refusesStore(err error) bool {
	var e *sdk.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// untagged returns the body of an attempt with every metadata key only Settle may send
// (llm.SettleKey) dropped, and its top-level fields, nil when it is not a JSON object. It
// runs before every send, whatever is known of the provider's store: a client that named
// another operation in those keys would otherwise have its completion stored as that
// operation's, and a lookup would take it for that operation's answer. A body with metadata
// is sent as re-encoded from the fields read, so the provider reads the same keys as here.
func untagged(body []byte) ([]byte, map[string]json.RawMessage) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return body, nil
	}
	raw, ok := fields["metadata"]
	if !ok {
		return body, fields
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) == nil && meta != nil {
		for k := range meta {
			if llm.SettleKey(k) {
				delete(meta, k)
			}
		}
		fields["metadata"], _ = json.Marshal(meta)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return body, fields
	}
	return out, fields
}

// tagBody returns the body of an attempt as sent to a provider that stores completions,
// from its fields as untagged read them: store: true, and metadata naming the operation and
// its tenant. The client's own metadata is kept beside Settle's keys; past the provider's 16
// pairs the client's keys last in order are left out. A client that sent store: false is
// not overruled: ok is false, the body goes untagged, and the call cannot be looked up.
func tagBody(fields map[string]json.RawMessage, opID string, tenantID int64) (_ []byte, ok bool) {
	if opID == "" || fields == nil {
		return nil, false
	}
	if raw, ok := fields["store"]; ok && strings.TrimSpace(string(raw)) == "false" {
		return nil, false
	}
	meta := map[string]string{}
	_ = json.Unmarshal(fields["metadata"], &meta)
	if len(meta) > maxMetadata-2 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys[maxMetadata-2:] {
			delete(meta, k)
		}
	}
	meta[llm.MetaOperation], meta[llm.MetaTenant] = opID, strconv.FormatInt(tenantID, 10)
	tagged := maps.Clone(fields)
	tagged["store"] = json.RawMessage("true")
	tagged["metadata"], _ = json.Marshal(meta)
	out, err := json.Marshal(tagged)
	if err != nil {
		return nil, false
	}
	return out, true
}

// mentionsStore reports whether a provider's refusal is about store or metadata.
func mentionsStore(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "store") || strings.Contains(m, "metadata")
}

// FindStored implements llm.StoredCompletions: GET /chat/completions with
// metadata[settle_operation_id], every page, through the official SDK.
func (o *Client) FindStored(ctx context.Context, operationID string) ([]llm.Stored, error) {
	var out []llm.Stored
	it := o.sdk.Chat.Completions.ListAutoPaging(ctx, sdk.ChatCompletionListParams{Limit: sdk.Int(100),
		Metadata: shared.Metadata{llm.MetaOperation: operationID}})
	for it.Next() {
		out = append(out, stored(it.Current()))
		if len(out) > 1000 {
			break // more than a thousand generations of one call: enough to tell
		}
	}
	if err := it.Err(); err != nil {
		return nil, o.readError(err, "list the stored completions of "+operationID)
	}
	return out, nil
}

// GetStored implements llm.StoredCompletions: GET /chat/completions/{id} through the SDK.
func (o *Client) GetStored(ctx context.Context, id string) (*llm.Stored, error) {
	c, err := o.sdk.Chat.Completions.Get(ctx, id)
	if err != nil {
		return nil, o.readError(err, "read stored completion "+id)
	}
	s := stored(*c)
	return &s, nil
}

var _ llm.StoredResponses = (*Client)(nil)

// GetResponse implements llm.StoredResponses: GET /responses/{id} through the SDK, the
// response as the provider holds it now (its status says whether it finished).
func (o *Client) GetResponse(ctx context.Context, id string) (*llm.Stored, error) {
	r, err := o.sdk.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		return nil, o.readError(err, "read stored response "+id)
	}
	var extra struct {
		RequestID string `json:"request_id"`
	}
	raw := r.RawJSON()
	_ = json.Unmarshal([]byte(raw), &extra)
	sec, frac := math.Modf(r.CreatedAt)
	return &llm.Stored{ID: r.ID, OperationID: r.Metadata[llm.MetaOperation], Tenant: r.Metadata[llm.MetaTenant],
		RequestID: extra.RequestID, Created: time.Unix(int64(sec), int64(frac*1e9)).UTC(), Body: json.RawMessage(raw),
		Route: llm.ResponsesRoute, Status: string(r.Status)}, nil
}

func stored(c sdk.ChatCompletion) llm.Stored {
	var extra struct {
		RequestID string `json:"request_id"`
	}
	raw := c.RawJSON()
	_ = json.Unmarshal([]byte(raw), &extra)
	return llm.Stored{ID: c.ID, OperationID: c.Metadata[llm.MetaOperation], Tenant: c.Metadata[llm.MetaTenant],
		RequestID: extra.RequestID, Created: time.Unix(c.Created, 0).UTC(), Body: json.RawMessage(raw)}
}

// readError classifies a failed read of the store: 404 is ENOTFOUND, anything else means the
// provider could not be asked now (EUNAVAILABLE).
func (o *Client) readError(err error, what string) error {
	var e *sdk.Error
	if errors.As(err, &e) && e.StatusCode == http.StatusNotFound {
		return &ops.Error{Code: ops.ENOTFOUND, Message: fmt.Sprintf("%s has no such stored completion.", o.cfg.Name), Err: err}
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf("%s could not be asked (%s); try again shortly.", o.cfg.Name, what), Err: err}
}

// newSDK is the official client the store is read with: reads are safe to retry.
func newSDK(cfg Config) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(cfg.BaseURL+"/"), option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.HTTPClient), option.WithMaxRetries(2), option.WithRequestTimeout(30*time.Second))
}
