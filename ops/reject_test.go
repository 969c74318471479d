package ops_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// rejectStore records refused requests, or fails to with err.
type rejectStore struct {
	ops.Store
	err      error
	recorded []string
}

func (s *rejectStore) RecordRequest(_ context.Context, p ops.RequestParams, _ time.Time) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.recorded = append(s.recorded, p.RequestRef)
	return int64(len(s.recorded)), nil
}

// TestRefuseAnswersWhatItCouldRecord: ops rule 8 counts every client request, the refused
// ones too. A refusal that is recorded is answered as the refusal; one the database was
// unreachable to record is answered as the outage, which the client tries again, not as a
// refusal it would not send again; any other failure to record leaves the refusal the answer
// and keeps the failure beside it, for the log.
func TestRefuseAnswersWhatItCouldRecord(t *testing.T) {
	refusal := &ops.Error{Code: ops.EINVALID, Reason: "missing_field", Message: "amount_cents is required."}
	broken := errors.New("check constraint violated")
	for _, c := range []struct {
		name      string
		recordErr error
		code      string
		reason    string
		wantIs    []error
	}{
		{"recorded", nil, ops.EINVALID, "missing_field", []error{refusal}},
		{"database unreachable", ops.DatabaseUnreachable(errors.New("connection refused")), ops.EUNAVAILABLE, ops.ReasonDatabaseUnavailable, nil},
		{"other failure", broken, ops.EINVALID, "missing_field", []error{refusal, broken}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &rejectStore{err: c.recordErr}
			l := ops.NewLedger(s, ops.SystemClock{})
			err := l.Refuse(context.Background(), 1, ops.KindRefund, "req-1", refusal)
			if ops.ErrorCode(err) != c.code || ops.ErrorReason(err) != c.reason {
				t.Fatalf("answered %v (%s, %s), want %s, %s", err, ops.ErrorCode(err), ops.ErrorReason(err), c.code, c.reason)
			}
			for _, want := range c.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("the answer %v does not hold %v", err, want)
				}
			}
			if c.recordErr == nil && (len(s.recorded) != 1 || s.recorded[0] != "req-1") {
				t.Errorf("recorded %v, want the refused request req-1", s.recorded)
			}
		})
	}
}
