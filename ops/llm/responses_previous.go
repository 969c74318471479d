package llm

import (
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// A Responses call may go on from an earlier response (previous_response_id), which the
// provider reads from its own store with all its input and output. The provider's account is
// shared by every tenant, so the provider would answer from any response it holds, another
// tenant's among them: the id is taken only when one of the calling tenant's own calls
// through Settle created it, as GET /v1/responses/{id} takes it (tenantResponse), and any
// other, another tenant's or none, is refused alike before anything is sent.

// checkPrevious refuses a Responses call whose previous_response_id is not one of the
// tenant's own responses. Any other error (the database could not be asked) is returned as
// it is.
func (x *exchange) checkPrevious() error {
	if x.api.route() != responsesRoute {
		return nil
	}
	var prev *string
	if err := unmarshalField(x.req.fields, "previous_response_id", &prev); err != nil {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Message: "previous_response_id must be a response id."}
	}
	if prev == nil {
		return nil
	}
	_, _, err := x.g.tenantResponse(x.ctx, x.tenant, *prev)
	switch ops.ErrorCode(err) {
	case "":
		return nil
	case ops.ENOTFOUND, ops.EINVALID:
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest, Err: err,
			Message: fmt.Sprintf("previous_response_id %q names no response created through Settle with this tenant's tokens.", *prev)}
	}
	return fmt.Errorf("check previous_response_id: %w", err)
}
