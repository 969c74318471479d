package demo

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// fakeClock is the clock of the demo's fakes: the history's simulated clock while the history
// is written, so what Stripe and the LLM provider record carries the times Settle
// recorded, and the wall clock once the live traffic starts.
type fakeClock struct {
	sim atomic.Pointer[ops.ManualClock]
}

// Now is the simulated time while a history is written, the wall clock otherwise.
func (c *fakeClock) Now() time.Time {
	if m := c.sim.Load(); m != nil {
		return m.Now()
	}
	return time.Now().UTC()
}

// Fakes are the demo's in-process providers, each on its own loopback port, and the clock
// they read (the history's while it is written). A Settle that plays the demo is configured with their bases and Stripe's
// webhook secret.
type Fakes struct {
	clock *fakeClock
	// Stripe signs its webhooks with StripeWebhookSecret.
	Stripe              *fake.Stripe
	StripeBase          string
	StripeWebhookSecret string
	// LLM is the OpenAI-compatible provider; nil plays no LLM traffic.
	LLM     *fake.LLM
	LLMBase string
	// Anthropic serves the Messages API; nil sends nothing there.
	Anthropic     *fake.Anthropic
	AnthropicBase string
}

// StartFakes starts the demo's fake Stripe, fake LLM provider and fake Anthropic. Stripe
// and the LLM provider fail now and then as the real ones do; Anthropic has no faults of
// its own, as the demo breaks one of its streams on purpose (Traffic.UnknownMessage).
func StartFakes() (f *Fakes, err error) {
	f = &Fakes{clock: &fakeClock{}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	f.StripeWebhookSecret = "whsec_" + hex.EncodeToString(secret)
	f.Stripe = fake.NewStripe(fake.StripeOptions{WebhookSecret: f.StripeWebhookSecret, Seed: time.Now().UnixNano(), Clock: f.clock.Now})
	if f.StripeBase, err = f.Stripe.Start("127.0.0.1:0"); err != nil {
		return f, fmt.Errorf("start the demo's fake Stripe: %w", err)
	}
	f.LLM = fake.NewLLM(fake.LLMOptions{Seed: time.Now().UnixNano(), Latency: demoLLMLatency, ChunkDelay: demoLLMChunkDelay, Clock: f.clock.Now})
	faults, err := fake.ParseLLMFaults(demoLLMFaults)
	if err != nil {
		return f, err
	}
	for _, x := range faults {
		f.LLM.AddFault(x)
	}
	if f.LLMBase, err = f.LLM.Start("127.0.0.1:0"); err != nil {
		return f, fmt.Errorf("start the demo's fake LLM: %w", err)
	}
	f.Anthropic = fake.NewAnthropic(fake.AnthropicOptions{Seed: time.Now().UnixNano(), Latency: demoLLMLatency,
		ChunkDelay: demoLLMChunkDelay, Clock: f.clock.Now})
	if f.AnthropicBase, err = f.Anthropic.Start("127.0.0.1:0"); err != nil {
		return f, fmt.Errorf("start the demo's fake Anthropic: %w", err)
	}
	return f, nil
}

// Close stops the fakes that were started.
func (f *Fakes) Close() {
	if f.Stripe != nil && f.StripeBase != "" {
		f.Stripe.Close()
	}
	if f.LLM != nil && f.LLMBase != "" {
		f.LLM.Close()
	}
	if f.Anthropic != nil && f.AnthropicBase != "" {
		f.Anthropic.Close()
	}
}

// Progress is what the demo reports its long steps to: the history's hours, the refunds
// written before the live traffic.
type Progress interface {
	// Start begins a step of total units, named by unit ("hours").
	Start(total int, unit string)
	// Add counts n units done.
	Add(n int)
	// Done ends the step.
	Done()
}

// noProgress reports nothing.
type noProgress struct{}

func (noProgress) Start(int, string) {}
func (noProgress) Add(int)           {}
func (noProgress) Done()             {}
