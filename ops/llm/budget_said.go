package llm

import "fmt"

// said is what a budget refusal says of what it refuses: a client's call of the gateway, or
// a pipeline job's generation. A job's client submitted a job and made no call; it holds no
// key of a call to retry, and the job's worker sends, holds back and resumes its generation,
// so a refusal written for a call would tell it of things it never did (ops rule 12).
type said struct {
	// did is what the refusal did with it: newCallRefused, resendRefused's sentence, or their
	// job's counterparts.
	did string
	job bool
}

// callSaid is a refusal of a client's new call of the gateway.
var callSaid = said{did: newCallRefused}

// generationSaid is a refusal of a pipeline job's new generation.
var generationSaid = said{did: "this job's generation was recorded as refused and nothing of it was sent.", job: true}

// resendSaid is a refusal of a resend of operation opID, whose earlier attempts were sent.
func resendSaid(opID string) said { return said{did: resendRefused(opID)} }

// generationResendSaid is a refusal of the resend of a job's generation opID, which its
// worker resumed: the generation stays open and the job resumes it, with no client's retry.
func generationResendSaid(opID string) said {
	return said{job: true, did: fmt.Sprintf("this resend of the job's generation was recorded as refused and sent nothing more; "+
		"its generation %s, whose earlier attempts were sent, stays open and the job resumes it once the budget allows.", opID)}
}

// what names it at the head of a refusal that says what it may cost.
func (w said) what() string {
	if w.job {
		return "This job's generation"
	}
	return "This call"
}

// input says what its n input tokens were counted from.
func (w said) input(n int64) string {
	if w.job {
		return fmt.Sprintf("its prompt's %d bytes (the document's text with the pipeline's instructions) counted as input tokens", n)
	}
	return fmt.Sprintf("its body's %d bytes counted as input tokens", n)
}

// afterReset ends a refusal for a spent budget: what happens to it once the budget resets.
func (w said) afterReset() string {
	if w.job {
		return "the job waits in the queue until then."
	}
	return "a retry of a key whose call already ran is still answered."
}

// held says what holds a part of what is left, and when to try again, in a refusal of a
// call that fits what is left but not beside what is in flight.
func (w said) held() (inFlight, again string) {
	if w.job {
		return "your tenant's calls and job generations in flight on this server",
			"The job is tried again in a few seconds: a call or generation that ends gives back what it did not spend."
	}
	return "your tenant's calls in flight on this server", "Retry in a few seconds: a call that ends gives back what it did not spend."
}

// said is what a refusal of the call whose output cap n names says of it: a cap of a model
// profile is a job's generation's.
func (n capName) said() said {
	if n.profile != "" {
		return generationSaid
	}
	return callSaid
}
