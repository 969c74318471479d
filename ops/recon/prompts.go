package recon

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// PromptTokenReport is a UsageSource whose report counts the tokens it billed but not the
// requests (Anthropic's Messages usage report): its rows' InputTokens are every prompt token
// billed, whether the prompt cache served it or not, and their Requests are zero. The
// reconciler compares it with the prompts of the attempts Settle sent, in buckets of
// PromptBuckets (see comparePrompts).
type PromptTokenReport interface {
	PromptBuckets() time.Duration
}

// promptWindow is one model's billing in one window of the prompt comparison (a bucket, or
// two neighbouring buckets taken together), beside the attempts Settle sent in it.
type promptWindow struct {
	Start time.Time     `json:"start"`
	Width time.Duration `json:"-"`
	// Span is Width in words ("1m0s"), for the page.
	Span  string `json:"width"`
	Model string `json:"model"`
	// BilledTokens are the prompt tokens the provider billed, ByKey the same per API key;
	// BilledOutput its output tokens.
	BilledTokens int64            `json:"billed_prompt_tokens"`
	ByKey        map[string]int64 `json:"billed_by_key,omitempty"`
	BilledOutput int64            `json:"billed_output_tokens"`
	// AnsweredTokens are the prompt tokens of Settle's answered attempts.
	AnsweredTokens int64 `json:"answered_prompt_tokens"`
	// Billed is how many requests the provider billed, as far as the tokens show it: set only
	// when the billed tokens are exactly those of the answered attempts and of some of the
	// uncertain ones.
	Billed    *int64 `json:"billed,omitempty"`
	Answered  int64  `json:"answered"`
	Uncertain int64  `json:"uncertain"`
	Sent      int64  `json:"sent"`
	// Unsized counts answered or uncertain attempts whose prompt size Settle never learned
	// (no attempt of their operation was answered).
	Unsized int64 `json:"unsized,omitempty"`
	// Attempts are the uncertain attempts; ExplainedBy those whose prompts, billed, make up
	// the difference exactly, when only one choice of them does.
	Attempts    []SentPrompt `json:"uncertain_attempts,omitempty"`
	ExplainedBy []SentPrompt `json:"explained_by,omitempty"`

	// answeredUnsized counts the answered attempts that carry no prompt size.
	answeredUnsized int64
	// suspects are the uncertain attempts that may explain the difference when no one
	// choice of them makes it up exactly.
	suspects []SentPrompt
}

func (p *promptWindow) end() time.Time { return p.Start.Add(p.Width) }

// span is the window's length in words: "minute", "2 minutes".
func (p *promptWindow) span() string {
	if p.Width%time.Minute != 0 {
		return p.Width.String()
	}
	if n := int64(p.Width / time.Minute); n != 1 {
		return fmt.Sprintf("%d minutes", n)
	}
	return "minute"
}

// count is n things: "1 attempt", "2 attempts".
func count(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// diff is what the provider billed beyond the prompts of the answered attempts.
func (p *promptWindow) diff() int64 { return p.BilledTokens - p.AnsweredTokens }

// comparePrompts compares a report that counts prompt tokens (PromptTokenReport) with the
// attempts Settle sent, bucket by bucket of width and model, and records every bucket that
// differs as a usage mismatch. It closes nothing.
//
// An LLM provider takes no idempotency key, so every answered attempt was billed once and an
// attempt whose outcome is unknown may have been billed too. Every attempt of one operation
// sends the same request, whose prompt has one size whichever part the prompt cache served,
// so a bucket is in order when the prompt tokens billed are those of the answered attempts.
// Beyond them, the difference is looked for among the prompts of the uncertain attempts: a
// difference that is exactly the prompts of some of them says they were billed (low: a
// retry's first generation billed beside the answer is money spent twice, the first
// generation of a call still unknown is its only one); a difference that no choice of them
// makes up is a request Settle did not send (high), unless attempts whose prompt size Settle
// never learned could be it (low). Fewer tokens than the answered attempts' means the report
// is missing requests (medium). A request the provider counts in the minute after the one
// its attempt started in shows as one bucket short and the next one over: two neighbours
// that together are closer to order than either alone are taken as one window.
//
// The reconciler never closes an operation from this comparison. A bucket's sums name no
// message, so they are no record of one (ops rule 9), and there is no message to give the
// client's retry; a bucket in order is no proof that an uncertain attempt ran nothing
// (ops rule 11), as the report runs late and may count a request in another bucket. The finding
// names the operations whose prompts explain a bucket, for the person who settles them.
func (r *Reconciler) comparePrompts(ctx context.Context, provider string, rows []UsageRow, w Window, width time.Duration, rep *Report) error {
	sent, err := r.Store.SentPrompts(ctx, provider, w, width)
	if err != nil {
		return err
	}
	windows := promptWindows(rows, sent, w, width)
	now := r.Ledger.Clock.Now()
	pr := r.progress()
	pr.Start(len(windows), "buckets")
	defer pr.Done()
	for _, p := range windows {
		pr.Add(1)
		rep.Buckets++
		rep.BilledTokens += p.BilledTokens
		rep.AnsweredTokens += p.AnsweredTokens
		rep.Answered += p.Answered
		sev, what, ok := p.judge()
		if p.Billed != nil {
			rep.Billed += *p.Billed
		}
		if ok {
			continue
		}
		rep.UsageMismatch++
		p.Span = p.Width.String()
		body, _ := json.Marshal(p)
		f := Finding{Kind: ExceptionUsageMismatch, Provider: provider, Severity: sev, Details: body,
			Ref:   fmt.Sprintf("%s/%s %s", p.Start.Format(time.RFC3339), p.Width, p.Model),
			Actor: r.actor(provider), At: now,
			Summary: fmt.Sprintf("%s billed %d prompt tokens of %s in the %s from %s; the prompts of Settle's %s come to %d: %s.",
				provider, p.BilledTokens, p.Model, p.span(), p.Start.Format("2006-01-02 15:04 MST"), count(p.Answered, "answered attempt"), p.AnsweredTokens, what)}
		if id, tenant := p.operation(); id != "" {
			f.OperationID, f.TenantID = id, tenant
		}
		if err := r.record(ctx, rep, f); err != nil {
			return err
		}
	}
	return nil
}

// dated is the suffix of a model's dated snapshot or of its moving alias: a call that asks for
// claude-sonnet-4-5 is answered, and billed, as claude-sonnet-4-5-20250929.
var dated = regexp.MustCompile(`-(\d{8}|latest)$`)

// modelFamily is the name a model's calls and its report rows are compared under.
func modelFamily(m string) string { return dated.ReplaceAllString(m, "") }

// promptWindows sets the report's rows inside w beside the attempts sent, bucket by bucket of
// width and model family, in time order; a bucket out of order is taken together with the
// one before it when the two make a window closer to order (a request counted in the minute
// after the one its attempt started in).
func promptWindows(rows []UsageRow, sent []SentPrompt, w Window, width time.Duration) []*promptWindow {
	type key struct {
		family string
		start  int64
	}
	byKey := map[key]*promptWindow{}
	get := func(model string, t time.Time) *promptWindow {
		k := key{modelFamily(model), t.Truncate(width).Unix()}
		p := byKey[k]
		if p == nil {
			p = &promptWindow{Start: time.Unix(k.start, 0).UTC(), Width: width, Model: model, ByKey: map[string]int64{}}
			byKey[k] = p
		}
		return p
	}
	for _, u := range rows {
		if u.Start.Before(w.From) || !u.Start.Before(w.To) {
			continue
		}
		p := get(u.Model, u.Start)
		p.Model = u.Model // the provider's own name for it
		p.BilledTokens += u.InputTokens
		p.BilledOutput += u.OutputTokens
		p.ByKey[u.APIKeyID] += u.InputTokens
	}
	for _, s := range sent {
		p := get(s.Model, s.Start)
		p.add(s)
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].family < keys[j].family || keys[i].family == keys[j].family && keys[i].start < keys[j].start
	})
	var out []*promptWindow
	for _, k := range keys {
		p := byKey[k]
		if n := len(out); n > 0 {
			last := out[n-1]
			if modelFamily(last.Model) == k.family && last.end().Equal(p.Start) {
				if worst := max(last.rank(), p.rank()); worst > 0 {
					if m := last.clone(); m.merge(p) < worst {
						out[n-1] = m
						continue
					}
				}
			}
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// add counts what was sent in the window: one uncertain attempt, or summed attempts.
func (p *promptWindow) add(s SentPrompt) {
	p.Sent += s.Count
	switch {
	case s.Outcome == ops.OutcomeOK:
		p.Answered += s.Count
		p.AnsweredTokens += s.PromptTokens
		p.answeredUnsized += s.Unsized
	case s.Outcome == "" || s.Outcome.Uncertain():
		p.Uncertain += s.Count
		p.Attempts = append(p.Attempts, s)
	default:
		return // refused at the door or invalid: nothing was generated
	}
	p.Unsized += s.Unsized
}

// rank is how far from order the window is: 0 in order, then by severity.
func (p *promptWindow) rank() int {
	sev, _, ok := p.clone().judge()
	if ok {
		return 0
	}
	for i, s := range Severities {
		if s == sev {
			return i + 1
		}
	}
	return len(Severities) + 1
}

// clone is a copy of the window that judging or merging leaves p as it is.
func (p *promptWindow) clone() *promptWindow {
	c := *p
	c.ByKey = make(map[string]int64, len(p.ByKey))
	for k, v := range p.ByKey {
		c.ByKey[k] = v
	}
	c.Attempts = slices.Clone(p.Attempts)
	c.ExplainedBy, c.suspects, c.Billed = nil, nil, nil
	return &c
}

// merge takes the next bucket q into p, and returns the rank of the window they make.
func (p *promptWindow) merge(q *promptWindow) int {
	if p.BilledTokens == 0 && q.BilledTokens > 0 {
		p.Model = q.Model // the provider's own name for it
	}
	p.Width = q.end().Sub(p.Start)
	p.BilledTokens += q.BilledTokens
	p.BilledOutput += q.BilledOutput
	for k, v := range q.ByKey {
		p.ByKey[k] += v
	}
	p.AnsweredTokens += q.AnsweredTokens
	p.Answered, p.Uncertain, p.Sent, p.Unsized = p.Answered+q.Answered, p.Uncertain+q.Uncertain, p.Sent+q.Sent, p.Unsized+q.Unsized
	p.answeredUnsized += q.answeredUnsized
	p.Attempts = append(p.Attempts, q.Attempts...)
	return p.rank()
}

// maxSubsets bounds the search for the uncertain attempts that make up a difference: 2^16
// choices of them.
const maxSubsets = 16

// judge says whether the window is in order and, when it is not, how bad it is and what the
// difference is, in words (see comparePrompts). It sets Billed and ExplainedBy when the tokens
// tell them.
func (p *promptWindow) judge() (Severity, string, bool) {
	d := p.diff()
	switch {
	case p.answeredUnsized > 0:
		return SeverityMedium, fmt.Sprintf("%s without a prompt size: the bucket cannot be compared", count(p.answeredUnsized, "answered attempt")), d == 0
	case d == 0:
		billed := p.Answered
		p.Billed = &billed
		return "", "", true
	case d < 0:
		return SeverityMedium, fmt.Sprintf("%d prompt tokens of answered attempts are missing from the report", -d), false
	}
	var sized, unsized []SentPrompt
	var most int64
	for _, a := range p.Attempts {
		if a.PromptTokens > 0 {
			sized = append(sized, a)
			most += a.PromptTokens
		} else {
			unsized = append(unsized, a)
		}
	}
	if len(sized) <= maxSubsets {
		matches := subsetsSumming(sized, d)
		switch {
		case len(matches) == 1:
			p.ExplainedBy = matches[0]
			billed := p.Answered + int64(len(matches[0]))
			p.Billed = &billed
			return SeverityLow, explained(matches[0]), false
		case len(matches) > 1:
			p.suspects = sized
			return SeverityLow, fmt.Sprintf("the prompts of %d of the %s come to the difference of %d tokens in more than one way, so which of them were billed the report cannot tell (operation %s)",
				len(matches[0]), count(int64(len(sized)), "attempt whose outcome Settle did not know"), d, operations(sized)), false
		}
	} else if d <= most {
		p.suspects = sized
		return SeverityLow, fmt.Sprintf("the %s may have been billed for the difference of %d tokens",
			count(int64(len(sized)), "attempt whose outcome Settle did not know"), d), false
	}
	if len(unsized) > 0 {
		p.suspects = unsized
		return SeverityLow, fmt.Sprintf("%d tokens more, for which the %s may have been billed: no attempt of its operation was answered, so Settle never learned its prompt's size (operation %s)",
			d, count(int64(len(unsized)), "attempt whose outcome Settle does not know"), operations(unsized)), false
	}
	return SeverityHigh, fmt.Sprintf("%d tokens more than the attempts Settle sent could explain (another client on the key, or another key of the organization)", d), false
}

// operations names the operations of attempts, each once.
func operations(as []SentPrompt) string {
	var ids []string
	seen := map[string]bool{}
	for _, a := range as {
		if !seen[a.OperationID] {
			seen[a.OperationID] = true
			ids = append(ids, a.OperationID)
		}
	}
	return strings.Join(ids, ", ")
}

// explained says what the billed uncertain attempts that make up a difference are: the first
// generation of a call answered by another attempt is a call billed twice; the generation of a
// call still without an answer may be its only one.
func explained(billed []SentPrompt) string {
	var twice, open int64
	perOp := map[string]int{}
	for _, a := range billed {
		perOp[a.OperationID]++
		if a.Status == ops.StatusSucceeded || perOp[a.OperationID] > 1 {
			twice++
		} else {
			open++
		}
	}
	var parts []string
	if twice > 0 {
		parts = append(parts, fmt.Sprintf("%s billed twice (an answer came from another attempt)", count(twice, "call")))
	}
	if open > 0 {
		parts = append(parts, fmt.Sprintf("%s generated for a call Settle has no answer for, which cannot be fetched", count(open, "message")))
	}
	verb := "were"
	if len(billed) == 1 {
		verb = "was"
	}
	return fmt.Sprintf("the prompt of %s whose outcome Settle did not know %s billed too: %s (operation %s)",
		count(int64(len(billed)), "attempt"), verb, strings.Join(parts, "; "), operations(billed))
}

// operation is the one operation whose attempts explain the window, or may explain it, when
// there is one.
func (p *promptWindow) operation() (string, int64) {
	as := p.ExplainedBy
	if len(as) == 0 {
		as = p.suspects
	}
	if len(as) == 0 {
		return "", 0
	}
	first := as[0]
	for _, a := range as[1:] {
		if a.OperationID != first.OperationID {
			return "", 0
		}
	}
	return first.OperationID, first.TenantID
}

// subsetsSumming returns the choices of attempts whose prompts come to exactly d, up to two
// that differ in the operations they name (a second says the report cannot tell which were
// billed). Two attempts of one operation send one prompt, so choosing either tells the same.
func subsetsSumming(as []SentPrompt, d int64) [][]SentPrompt {
	var out [][]SentPrompt
	seen := map[string]bool{}
	for mask := 1; mask < 1<<len(as) && len(out) < 2; mask++ {
		var sum int64
		for i, a := range as {
			if mask&(1<<i) != 0 {
				sum += a.PromptTokens
			}
		}
		if sum != d {
			continue
		}
		var pick []SentPrompt
		var ids []string
		for i, a := range as {
			if mask&(1<<i) != 0 {
				pick = append(pick, a)
				ids = append(ids, a.OperationID)
			}
		}
		sort.Strings(ids)
		if sig := strings.Join(ids, " "); !seen[sig] {
			seen[sig] = true
			out = append(out, pick)
		}
	}
	return out
}
