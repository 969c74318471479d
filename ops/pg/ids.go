package pg

import "github.com/google/uuid"

// CanonicalID is id in the spelling PostgreSQL takes for a uuid, and whether id is one. An id
// in a path, a form or a search box is a person's or a client's text: the parser also takes
// spellings the server refuses (urn:uuid:, braces), which must reach a query as the
// operation's own id, not as a server error.
func CanonicalID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	return u.String(), true
}
