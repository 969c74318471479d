package main

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// bodyKeepEnv reads SETTLE_LLM_BODY_KEEP: how long prompts and completions outlive the key's
// TTL. At least an hour, so a late replay or a person looking into a call still finds them.
func bodyKeepEnv(e environ) (time.Duration, error) {
	keep, err := e.duration(envLLMBodyKeep, llm.DefaultBodyKeep)
	if err != nil {
		return 0, err
	}
	if keep < time.Hour {
		return 0, usagef("%s=%s is shorter than an hour", envLLMBodyKeep.Name, keep)
	}
	return keep, nil
}

// startBodyPurge runs the body purge of serve and demo: past the key's TTL plus
// SETTLE_LLM_BODY_KEEP it deletes LLM prompts and completions, and finished jobs' documents
// and results, in small batches. Every replica may run it; its role lets one act at a
// time. Jobs have no TTL of their own: theirs is the LLM key's.
func (p *Program) startBodyPurge(ctx context.Context) {
	pr := &llm.Purger{Store: purgestore.New(p.DB), Clock: p.Clock, Keep: p.Config.LLM.BodyKeep, JobTTL: p.Config.LLM.KeyTTL,
		Role: p.role(llm.PurgeRole, "purge"), Logger: p.Logger}
	p.goLoop(ctx, pr.Loop())
}
