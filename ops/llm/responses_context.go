package llm

import (
	"encoding/json"
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// A Responses call may go on from what the provider stored before: an earlier response
// (previous_response_id), read with all its input and output, or a conversation
// (conversation), read and added to. The provider's account is shared by every tenant, so the
// provider would answer from any response or conversation it holds, another tenant's among
// them. A previous response is taken only when one of the calling tenant's own calls through
// Settle created it, as GET /v1/responses/{id} takes it (tenantResponse), and any other,
// another tenant's or none, is refused alike before anything is sent. No conversation is
// created through Settle, which serves no conversations route, so none is any tenant's own
// and a call naming one is refused.

// checkStoredContext refuses a Responses call that names a previous response that is not one
// of the tenant's own, or any conversation. Any other error (the database could not be
// asked) is returned as it is.
func (x *exchange) checkStoredContext() error {
	if x.api.route() != responsesRoute {
		return nil
	}
	var conv json.RawMessage
	_ = unmarshalField(x.req.fields, "conversation", &conv) // every JSON value is a RawMessage
	if conv != nil {
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonInvalidRequest,
			Message: "conversation names a conversation of the provider's account, and none is created through Settle: go on from one of this tenant's own responses with previous_response_id instead."}
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
