package web_test

import (
	"golang.org/x/crypto/bcrypt"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// accounts is the accounts' store on db that the package's tests sign in through. It hashes
// passwords at bcrypt.MinCost: under -race a hash at the product's cost takes a second or
// more of CPU, and this package signs people in hundreds of times, most of its run time when
// they hashed as the product does. What the cost itself changes is tested where it matters:
// accountstore's tests hash at the product's cost, and TestLoginSuccess and TestLoginFailure
// sign in and are refused against hashes at the product's cost (productAccounts).
func accounts(db *pg.DB) *accountstore.Store {
	return accountstore.New(db, accountstore.WithHashCost(bcrypt.MinCost))
}

// productAccounts is the accounts' store at the product's bcrypt cost.
func productAccounts(db *pg.DB) *accountstore.Store { return accountstore.New(db) }
