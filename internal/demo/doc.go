// Package demo is what 'settle demo' plays on a running Settle: a month of history written
// through the product's own write path before the server starts, then live traffic through
// its API, its MCP server and its LLM gateway (refund customers, the support agent's story,
// a chat backend on every LLM API, a document pipeline), against in-process fakes of
// Stripe, an LLM provider and Anthropic that fail as the real ones do. cmd/settle starts
// the database and the server and hands them over; only it imports this package.
package demo
