package llm

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/settle-dev/settle/ops"
)

//go:embed prices.json
var defaultPrices []byte

// Price is what one model costs, in US dollars per million tokens. An embedding model
// has an input price only: its answers are not tokens. CachedInput is a prompt token read
// from the provider's prompt cache; CacheWrite one written to it (Anthropic's five-minute
// cache) and CacheWrite1h one written for an hour. MaxOutput is not a price: it is the most
// tokens one answer of the model has (0: not known), which bounds a call that names no
// output cap when a tenant's budget is checked.
type Price struct {
	Input        float64 `json:"input"`
	CachedInput  float64 `json:"cached_input"`
	CacheWrite   float64 `json:"cache_write"`
	CacheWrite1h float64 `json:"cache_write_1h"`
	Output       float64 `json:"output"`
	MaxOutput    int64   `json:"max_output_tokens"`
}

// PriceTable maps model names to prices. A model missing from it has an unknown cost,
// which is recorded as such and is never an error.
type PriceTable struct {
	Currency string           `json:"currency"`
	Models   map[string]Price `json:"models"`
}

// DefaultPrices returns the example table built into Settle (prices.json in this package).
func DefaultPrices() *PriceTable {
	t, err := ParsePrices(defaultPrices)
	if err != nil {
		panic("llm: built-in price table: " + err.Error())
	}
	return t
}

// LoadPrices reads a price table from a JSON file:
//
//	{"currency": "usd", "models": {"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.60, "max_output_tokens": 16384}}}
//
// Prices are per million tokens; cached_input and cache_write default to input, and
// cache_write_1h to cache_write. max_output_tokens, the most tokens one answer of the
// model has, is optional.
func LoadPrices(path string) (*PriceTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read price table: %w", err)
	}
	t, err := ParsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return t, nil
}

// ParsePrices reads a price table from JSON; unknown fields are refused so a typo is not a
// silent zero price.
func ParsePrices(b []byte) (*PriceTable, error) {
	var raw struct {
		Currency string           `json:"currency"`
		Unit     string           `json:"unit"`
		Note     string           `json:"note"`
		Models   map[string]Price `json:"models"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	t := &PriceTable{Currency: strings.ToLower(raw.Currency), Models: map[string]Price{}}
	if t.Currency == "" {
		t.Currency = "usd"
	}
	for name, p := range raw.Models {
		if p.Input < 0 || p.Output < 0 || p.CachedInput < 0 || p.CacheWrite < 0 || p.CacheWrite1h < 0 {
			return nil, fmt.Errorf("model %s: negative price", name)
		}
		if p.MaxOutput < 0 {
			return nil, fmt.Errorf("model %s: negative max_output_tokens", name)
		}
		if p.CachedInput == 0 {
			p.CachedInput = p.Input
		}
		if p.CacheWrite == 0 {
			p.CacheWrite = p.Input
		}
		if p.CacheWrite1h == 0 {
			p.CacheWrite1h = p.CacheWrite
		}
		t.Models[name] = p
	}
	return t, nil
}

// Priced says whether the table has a price for model (lookup's rules); a nil table prices
// nothing.
func (t *PriceTable) Priced(model string) bool {
	_, ok := t.lookup(model)
	return ok
}

// CurrencyOf is the currency the table costs calls in, lower case: the one place that
// answers it, so that the gateway's budgets, the job workers, the tenants page and the
// commands count in one currency. A nil table, or one naming none, is dollars ("usd"), as
// ParsePrices reads a table without a currency.
func (t *PriceTable) CurrencyOf() string {
	if t == nil || t.Currency == "" {
		return "usd"
	}
	return strings.ToLower(t.Currency)
}

// lookup finds a model's price: by exact name, else by the longest name that prefixes it
// followed by "-" (a dated snapshot such as gpt-4o-mini-2024-07-18 costs what gpt-4o-mini
// does).
func (t *PriceTable) lookup(model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	if p, ok := t.Models[model]; ok {
		return p, true
	}
	best, found := "", false
	for name := range t.Models {
		if strings.HasPrefix(model, name+"-") && len(name) > len(best) {
			best, found = name, true
		}
	}
	return t.Models[best], found
}

// MaxCallCostMicros is the largest cost one call is recorded with: one million units of
// the table's currency. Usage that prices above it is not believed (see Cost).
const MaxCallCostMicros = 1_000_000_000_000

// Cost returns what usage of model cost in micro-units of the table's currency, and
// whether the model's price is known. Prompt tokens read from the cache are charged at the
// cached rate, those written to it at the rate of their write.
//
// The counts are the provider's word, read from its answer: a count below zero, or usage
// that prices above MaxCallCostMicros, is a provider's error, not a cost, and counts as
// unknown. Believed, one such answer would turn the spend that sums every call's cost
// negative, or past the largest integer the database holds, which fails every later
// close that adds to it.
func (t *PriceTable) Cost(model string, u Usage) (micros int64, known bool) {
	p, ok := t.lookup(model)
	if !ok || min(u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.CacheWriteTokens, u.CacheWrite1hTokens) < 0 {
		return 0, false
	}
	cached := min(u.CachedTokens, u.PromptTokens)
	written := min(u.CacheWriteTokens, u.PromptTokens-cached)
	hour := min(u.CacheWrite1hTokens, written)
	// A price per million tokens is a price per token in micro-units.
	c := float64(u.PromptTokens-cached-written)*p.Input + float64(cached)*p.CachedInput +
		float64(written-hour)*p.CacheWrite + float64(hour)*p.CacheWrite1h + float64(u.CompletionTokens)*p.Output
	if !(c <= MaxCallCostMicros) {
		return 0, false
	}
	return int64(math.Round(c)), true
}

// CostCurrency is the currency op's recorded cost is in: the price table's that priced it,
// which the usage record names, or dollars, the table's default, where it names none (no
// cost known, or recorded before the record named it). A page that showed every cost as
// dollars would say more than Settle knows of a table in euros (ops rule 12).
func CostCurrency(op *ops.Operation) string {
	var rec struct {
		Currency string `json:"currency"`
	}
	if len(op.Usage) > 0 && json.Unmarshal(op.Usage, &rec) == nil && rec.Currency != "" {
		return rec.Currency
	}
	return "usd"
}
