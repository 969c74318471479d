package pg

import (
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// legacyProviderKey is the predicate of operations_provider_key_legacy_idx (migration
// 00075): the keys not derived from their operation's id, which only operations opened
// before keys were derived carry. A lookup repeats it word for word, so that the planner may
// use the index whatever key the statement is given.
const legacyProviderKey = `o.provider_key <> '` + ops.ProviderKeyPrefix + `' || o.id::text`

// ProviderKeyMatch returns the condition on operations o that holds for the operation whose
// provider key is key, and binds key to the named parameter param in args. A key derived
// from an id (ops.ProviderKeyFor) is found on the primary key; any other on the index of
// the older operations' keys. The two forms never meet: a derived key is never in that
// index, and an older key is never of the derived form.
func ProviderKeyMatch(key, param string, args pgx.NamedArgs) string {
	args[param] = key
	if id, ok := ops.ProviderKeyOperation(key); ok {
		args[param+"_id"] = id
		return "(o.id = @" + param + "_id::uuid AND o.provider_key = @" + param + ")"
	}
	return "(o.provider_key = @" + param + " AND " + legacyProviderKey + ")"
}
