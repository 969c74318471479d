package views

// OpJobs is the pipeline jobs that use an llm_job operation: one generation may answer
// several client intents (one per Idempotency-Key with the same dedup key).
type OpJobs struct {
	Rows []OpJobRow
	// More, when set, says the list was cut and how.
	More string
	// Unavailable, when set, says why the jobs could not be read; the rest of the page
	// still shows.
	Unavailable string
}

// OpJobRow is one job, already formatted, with a cell for every checkpoint stage in order.
type OpJobRow struct {
	ID, Tenant, Status, IdempotencyKey      string
	Pipeline, PromptVersion, ModelProfile   string
	DedupKey, Created, Published, ErrorText string
	Checkpoints                             []JobCheckpointCell
}

// JobCheckpointCell is one stage of a job's computation. A stage not reached yet has
// Reached false and only its name.
type JobCheckpointCell struct {
	Stage   string
	Reached bool
	// InputHash is shortened for the eye; InputHashFull is kept for the title and copying.
	InputHash, InputHashFull string
	CodeVersion, Status      string
	Attempt, Result, Updated string
}
