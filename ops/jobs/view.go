package jobs

// OperationJob is a job that uses an llm_job operation, with the checkpoints of its
// computation, for the dashboard's operation page. The operation alone cannot say which
// client intents it answers or how far each got; this read pairs them.
type OperationJob struct {
	Job *Job
	// Checkpoints holds one entry per stage of Stages, in order. A stage not reached yet is
	// nil. The stages before published belong to the computation (the dedup key) and are
	// shared by every job with that key; published is this job's own.
	Checkpoints []*Checkpoint
}

// MaxOperationJobs bounds the jobs one operation page lists. Every job with one dedup key
// shares its operation, so a popular document could otherwise make the page unbounded; a
// reader returns one more to tell that the list was cut.
const MaxOperationJobs = 100
