package web

import "github.com/settle-dev/settle/ops"

// KindDeps says what the pages know of each kind of operation.
type KindDeps struct {
	// Kinds describes each kind: its name, its lookup, what protects it, its customer
	// sentences (the ledger, with the kinds the program registered). Without it a page
	// offers what an unregistered kind gets: nothing it cannot stand behind.
	Kinds Kinds
}

// Kinds is the registry of operation kinds (ops.Ledger).
type Kinds interface {
	Kind(k ops.Kind) ops.KindSpec
	Kinds() []ops.KindSpec
}

// kind is the spec of k.
func (s *Server) kind(k ops.Kind) ops.KindSpec {
	if s.Kinds == nil {
		return ops.KindSpec{Kind: k, Name: string(k)}
	}
	return s.Kinds.Kind(k)
}

// kinds lists the registered kinds, in the order they were registered.
func (s *Server) kinds() []ops.KindSpec {
	if s.Kinds == nil {
		return nil
	}
	return s.Kinds.Kinds()
}
