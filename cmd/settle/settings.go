package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A setting is one environment variable Settle reads (or one flag with no variable): the
// table of them, in the settings_*.go files, is the only place a variable is named. LoadConfig
// and every other reader read through an environ, which takes a setting of the table, so
// 'settle help' and docs/configuration.md, both generated from the table, list everything
// the code reads, and only that.
type setting struct {
	// Name is the variable; empty for a flag that has no variable.
	Name string
	// Flag is the command-line flag that wins over the variable, e.g. "--addr", or
	// "serve --secure-cookies" when only one of the commands has it.
	Flag string
	// Commands are the commands that read it, by name or by group (commandGroups); programs
	// other than settle ("go test", "settle-load") for a setting read outside this package.
	Commands []string
	// Default is what applies when it is unset, in Markdown; empty when nothing does.
	Default string
	// Required says when it must be set, in Markdown, e.g. "required with an issuer".
	Required string
	// Parses is what values it takes, in Markdown.
	Parses string
	// Short is its line in 'settle help', plain text.
	Short string
	// Doc is its entry in the manual, in Markdown.
	Doc string
	// Secret marks a value that may hold a credential (a URL, a token, a key, a DSN): no
	// message, refusals included, ever repeats it.
	Secret bool
	// ReadIn is the package that reads it when that is not this one (a package settle
	// imports, or a test helper): such a package cannot reach the table, so it names the
	// variable itself, and only there.
	ReadIn string

	section section
	defined bool
}

// section orders the table: the manual lists settings section by section, and within one
// in the order they are defined.
type section int

const (
	sectionProcess section = iota
	sectionStripe
	sectionServer
	sectionLLM
	sectionJobs
	sectionDashboard
	sectionTools
)

// settings is the table, filled by define as the package initialises.
var settings []*setting

// define adds s to the table in section sec and returns the handle readers read it with.
func define(sec section, s setting) *setting {
	s.section, s.defined = sec, true
	settings = append(settings, &s)
	return &s
}

// table is the settings in the manual's order.
func table() []*setting {
	out := slices.Clone(settings)
	slices.SortStableFunc(out, func(a, b *setting) int { return int(a.section) - int(b.section) })
	return out
}

// commandGroups name the sets of commands that read the same settings.
var commandGroups = map[string][]string{
	"every command": {"serve", "demo", "migrate", "worker", "reconcile", "retention run", "mcp",
		"user add", "token add", "token list", "token revoke", "tenant stripe-account", "tenant approvals",
		"tenant budget", "tenant list", "alerts export", "fake stripe", "fake llm", "fake anthropic"},
	"database commands": {"serve", "migrate", "worker", "reconcile", "retention run", "mcp",
		"user add", "token add", "token list", "token revoke", "tenant stripe-account", "tenant approvals", "tenant budget",
		"tenant list"},
	"server commands": {"serve", "demo", "worker", "reconcile", "retention run", "mcp"},
}

// groupOrder is the order the manual explains the groups in.
var groupOrder = []string{"database commands", "server commands", "every command"}

// An environ is the process environment as settle reads it: through the table only.
type environ func(string) string

// get is the value of s; it panics on a setting the table does not hold, a mistake no test
// run leaves in place.
func (e environ) get(s *setting) string {
	if s == nil || !s.defined || s.Name == "" {
		panic(fmt.Sprintf("setting %+v is not in the table of cmd/settle/settings_*.go", s))
	}
	return e(s.Name)
}

// or is the value of s, def when it is unset.
func (e environ) or(s *setting, def string) string {
	if v := e.get(s); v != "" {
		return v
	}
	return def
}

// duration reads s as a positive Go duration, def when it is unset.
func (e environ) duration(s *setting, def time.Duration) (time.Duration, error) {
	v := e.get(s)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("%s=%q is not a positive Go duration such as 8s or 1m", s.Name, v)
	}
	return d, nil
}

// rate reads s as a positive number of reads per second, def when it is unset.
func (e environ) rate(s *setting, def float64) (float64, error) {
	v := e.get(s)
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, usagef("%s=%q is not a positive number of reads per second such as 20 or 2.5", s.Name, v)
	}
	return f, nil
}

// helpEnvironment is the Environment section of 'settle help': every variable a settle
// command reads, with its line, its flag and its default.
func helpEnvironment() string {
	var b strings.Builder
	b.WriteString("Environment (flags win; docs/configuration.md explains each in full):\n")
	for _, s := range table() {
		if s.Name == "" || !readBySettle(s) {
			continue
		}
		text := s.Short
		var notes []string
		if s.Flag != "" {
			notes = append(notes, s.Flag)
		}
		if s.Default != "" {
			notes = append(notes, "default "+plain(s.Default))
		}
		if s.Required != "" {
			notes = append(notes, plain(s.Required))
		}
		if len(notes) > 0 {
			text += " (" + strings.Join(notes, "; ") + ")"
		}
		head := "  " + s.Name
		if len(head) < helpIndent-1 {
			head += strings.Repeat(" ", helpIndent-len(head))
		} else {
			head += "  "
		}
		b.WriteString(wrap(head, text))
	}
	return b.String()
}

// helpIndent is where the lines of 'settle help' start their text; helpWidth is where they end.
const (
	helpIndent = 26
	helpWidth  = 100
)

// wrap writes text after head, folded at helpWidth with the following lines at helpIndent.
func wrap(head, text string) string {
	var b strings.Builder
	line := head
	for i, w := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(w) > helpWidth {
			b.WriteString(line + "\n")
			line = strings.Repeat(" ", helpIndent) + w
			continue
		}
		if i > 0 {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}

// plain is Markdown text as a terminal shows it: without its code and emphasis marks.
func plain(md string) string { return strings.NewReplacer("`", "", "*", "").Replace(md) }

// readBySettle says whether a settle command reads s, rather than only the tests or
// another program.
func readBySettle(s *setting) bool {
	for _, c := range s.Commands {
		if commandGroups[c] != nil || slices.Contains(commandGroups["every command"], c) {
			return true
		}
	}
	return false
}

// docsTable is the settings table of docs/configuration.md in Markdown: a line naming the
// groups of commands, then one row a setting.
func docsTable() string {
	var b strings.Builder
	b.WriteString("\nThe commands column names these groups:")
	for i, g := range groupOrder {
		sep := ";"
		if i == len(groupOrder)-1 {
			sep = "."
		}
		if g == "every command" {
			fmt.Fprintf(&b, " *%s* is each command but `help`%s", g, sep)
			continue
		}
		fmt.Fprintf(&b, " *%s* are %s%s", g, codeList(commandGroups[g]), sep)
	}
	b.WriteString(" A variable marked *secret* may hold a credential: no refusal of the configuration repeats its value.\n\n")
	b.WriteString("| variable | flag | commands | default | value | meaning |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, s := range table() {
		var cmds []string
		for _, c := range s.Commands {
			if commandGroups[c] != nil {
				cmds = append(cmds, "*"+c+"*")
			} else {
				cmds = append(cmds, "`"+c+"`")
			}
		}
		parses := s.Parses
		if s.Secret {
			parses += "; *secret*"
		}
		def := s.Default
		if def == "" {
			def = "—"
		}
		if s.Required != "" {
			def += " (" + s.Required + ")"
		}
		cells := []string{code(s.Name), code(s.Flag), strings.Join(cmds, ", "), def, parses, s.Doc}
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
	return b.String()
}

// code is s in code marks, or nothing for an empty s.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

// codeList is names in code marks, joined as a sentence joins them.
func codeList(names []string) string {
	var cs []string
	for _, n := range names {
		cs = append(cs, code(n))
	}
	if len(cs) < 2 {
		return strings.Join(cs, "")
	}
	return strings.Join(cs[:len(cs)-1], ", ") + " and " + cs[len(cs)-1]
}
