package mcptool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLineLength is the longest line a stdio session reads as one message. It is a quarter
// of the SDK's own limit (mcp.DefaultMaxLineLength, 16 MiB), whose count also takes in
// bytes read ahead of the next message, so no line passed on can trip the SDK's limit.
const MaxLineLength = 4 << 20

// JSON-RPC error codes of a line the filter drops.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// logPrefix is how much of a dropped line is logged: enough to recognise it, never a whole
// payload an agent may have pasted into it.
const logPrefix = 48

// SyncWriter is a writer shared by a LineFilter's error replies and the transport's own
// replies: one lock per Write, so the lines of the two never interleave. The SDK writes each
// message with a single Write.
type SyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSyncWriter returns a SyncWriter over w.
func NewSyncWriter(w io.Writer) *SyncWriter { return &SyncWriter{w: w} }

// Write writes p to the underlying writer under the lock.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// LineFilter stands in front of a stdio transport's input. The SDK ends the whole session
// at the first line it cannot decode, so an agent that sends one bad line would lose its
// tools; the filter passes each well-formed line through byte for byte, and answers each
// malformed one itself (a JSON-RPC error on Replies), logs it once and drops it.
type LineFilter struct {
	src     *bufio.Reader
	replies io.Writer
	logger  *slog.Logger
	max     int
	pending []byte
	err     error
	// srcFailed tells the connection that a read error came from stdin itself, not from a
	// message: only then does the session end.
	srcFailed atomic.Bool
	// record records the tool calls of a dropped line and says what they are answered;
	// nil records nothing.
	record func(line []byte, reason string) string
}

// RecordRefusedCalls has the filter record each tool call of a line it drops (an id that is
// no id, a line over the limit whose first bytes read tools/call) as the tenant's refused
// request, through t (Tools.RefuseCall, ops rule 8); its error reply then says so.
func (f *LineFilter) RecordRefusedCalls(t *Tools) { f.record = t.refuseLine }

// NewLineFilter returns a filter reading lines from src, answering malformed ones on replies.
func NewLineFilter(src io.Reader, replies io.Writer, logger *slog.Logger) *LineFilter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &LineFilter{src: bufio.NewReaderSize(src, 64<<10), replies: replies, logger: logger, max: MaxLineLength}
}

// Read returns the bytes of well-formed lines, in order and unchanged.
func (f *LineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, tooLong, err := f.readLine()
		f.err = err
		if err != nil && !errors.Is(err, io.EOF) {
			f.srcFailed.Store(true)
		}
		if len(line) == 0 && !tooLong {
			continue
		}
		if keep, rerr := f.check(line, tooLong); rerr != nil {
			return 0, rerr
		} else if keep {
			f.pending = trimTrailingBlanks(line)
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// trimTrailingBlanks drops spaces and tabs between a message and its line end: the SDK
// takes them for trailing data and would end the session. Other lines are left unchanged.
func trimTrailingBlanks(line []byte) []byte {
	body := bytes.TrimRight(line, "\r\n")
	if t := bytes.TrimRight(body, " \t"); len(t) < len(body) {
		return append(t, line[len(body):]...)
	}
	return line
}

// readLine reads up to and including the next newline. A line over the limit is read to
// its end but not kept: only its first bytes come back, with tooLong set.
func (f *LineFilter) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.src.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > f.max {
				tooLong = true
				line = append(line, chunk[:min(len(chunk), logPrefix)]...)
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// check reports whether a line is passed on; a malformed one is answered and logged.
func (f *LineFilter) check(line []byte, tooLong bool) (bool, error) {
	code, id, reason := codeInvalidRequest, json.RawMessage("null"), ""
	switch trimmed := bytes.TrimSpace(line); {
	case tooLong:
		reason = fmt.Sprintf("a line over %d bytes", f.max)
	case len(trimmed) == 0:
		return true, nil // blank: the SDK skips it, as it always has
	case !json.Valid(trimmed):
		code, reason = codeParseError, "not JSON"
	default:
		var err error
		if id, err = validMessage(trimmed); err == nil {
			return true, nil
		}
		// The SDK's error may quote the line: keep only its start.
		reason = err.Error()[:min(len(err.Error()), 2*logPrefix)]
	}
	f.logger.Warn("dropped a malformed MCP message", "code", code, "reason", reason,
		"line_prefix", string(line[:min(len(line), logPrefix)]))
	note := ""
	if f.record != nil {
		note = f.record(line, plainReason(code, tooLong, reason))
	}
	return false, f.reply(code, id, reason, note)
}

// validMessage checks a JSON line as the SDK will decode it. On error it returns the line's
// id if one can be read (a string or an integer), else null.
func validMessage(data []byte) (json.RawMessage, error) {
	if data[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(data, &batch); err != nil || len(batch) == 0 {
			return json.RawMessage("null"), errors.New("an empty or unreadable batch")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return json.RawMessage("null"), fmt.Errorf("a batch with an invalid message: %w", err)
			}
		}
		return nil, nil
	}
	if _, err := jsonrpc.DecodeMessage(data); err != nil {
		return readableID(data), fmt.Errorf("not a valid JSON-RPC message: %w", err)
	}
	return nil, nil
}

// readableID returns a message's id if it is a string or an integer, else null.
func readableID(data []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil || len(m.ID) == 0 {
		return json.RawMessage("null")
	}
	var s string
	if json.Unmarshal(m.ID, &s) == nil {
		return m.ID
	}
	if _, err := strconv.ParseInt(string(m.ID), 10, 64); err == nil {
		return m.ID
	}
	return json.RawMessage("null")
}

// plainReason is why a line was dropped in the words of a refused tool call's answer: the
// decoder's own words, cut to what a log repeats, may stop mid-sentence.
func plainReason(code int, tooLong bool, reason string) string {
	switch {
	case tooLong:
		return reason
	case code == codeParseError:
		return "the line is not JSON"
	}
	return "the line is not a valid JSON-RPC request"
}

// reply writes one JSON-RPC error line. Where the line held a tool call, note is its message
// and says what was wrong; else the message is JSON-RPC's and the data says it.
func (f *LineFilter) reply(code int, id json.RawMessage, reason, note string) error {
	message, data := "Invalid Request", "dropped "+reason
	if code == codeParseError {
		message = "Parse error"
	}
	if note != "" {
		message, data = note, ""
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    string `json:"data,omitempty"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message, data}})
	if err != nil {
		return fmt.Errorf("encode error reply: %w", err)
	}
	if _, err := f.replies.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write error reply: %w", err)
	}
	return nil
}

// Transport wraps a transport reading from this filter. A line the filter passed may still
// be refused by the SDK once decoded (a batch under a protocol version that has none), which
// would end the session too: such a message is answered -32600 and dropped as well.
func (f *LineFilter) Transport(t mcp.Transport) mcp.Transport { return filterTransport{t, f} }

type filterTransport struct {
	mcp.Transport
	f *LineFilter
}

func (t filterTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return filterConn{c, t.f}, nil
}

type filterConn struct {
	mcp.Connection
	f *LineFilter
}

// Read skips messages the SDK refuses after decoding. The filter has already checked every
// line's framing, so the SDK's reader is still running after such a refusal.
func (c filterConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || c.f.srcFailed.Load() {
			return msg, err
		}
		reason := err.Error()[:min(len(err.Error()), 2*logPrefix)]
		c.f.logger.Warn("dropped a malformed MCP message", "code", codeInvalidRequest, "reason", reason)
		if werr := c.f.reply(codeInvalidRequest, json.RawMessage("null"), reason, ""); werr != nil {
			return nil, werr
		}
	}
}
