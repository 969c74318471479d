package main

import (
	"errors"
	"flag"
	"strconv"
	"strings"
)

// parseOnce parses args into fs and refuses a flag given twice: with the flag package's own
// rule, the last one wins, so 'token revoke --id 1 --id 2' would revoke 2 and say nothing of
// the 1. The refusal, like every mistake on the command line, comes before anything is
// opened or changed. flag.ErrHelp is returned as it is, for the usage.
func parseOnce(fs *flag.FlagSet, args []string) error {
	given := map[string][]string{}
	fs.VisitAll(func(f *flag.Flag) { f.Value = &countedValue{Value: f.Value, name: f.Name, given: given} })
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if v := given[f.Name]; len(v) > 1 && err == nil {
			err = usagef("%s: --%s is given twice (%s); give it once", fs.Name(), f.Name, strings.Join(v, ", then "))
		}
	})
	return err
}

// countedValue is a flag's value that notes each value given to it, so that parseOnce sees
// a flag given twice.
type countedValue struct {
	flag.Value
	name  string
	given map[string][]string
}

func (v *countedValue) Set(s string) error {
	v.given[v.name] = append(v.given[v.name], strconv.Quote(s))
	return v.Value.Set(s)
}

// IsBoolFlag keeps a boolean flag one that takes no value after it.
func (v *countedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
