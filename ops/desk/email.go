package desk

import (
	"sort"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/settle-dev/settle/ops"
)

// ReasonEmailNotShown is the reason of CheckEmailShows's refusals.
const ReasonEmailNotShown = "email_not_shown"

// CheckEmailShows returns an EINVALID error unless email, an account's address, shows
// other people who holds the account: the dashboard, approvals and the audit log name
// people by it, and an admin chooses whom to trust by reading it. So it may hold no
// character that does not show as itself (a bidi override that reverses what follows, an
// invisible or control character, a separator), no character Unicode writes otherwise in
// its compatibility form (fullwidth letters, ligatures), and its local part and each label
// of its domain hold letters of one script only (Japanese and Korean mixes excepted), so a
// Cyrillic or Greek letter cannot pass for a Latin one. A whole label in a script whose
// letters look Latin is still taken: that is a real address people may hold.
func CheckEmailShows(email string) error {
	for _, r := range email {
		if !unicode.IsPrint(r) || r == ' ' {
			return notShown("%+q holds a character that does not show as itself (%U); type the address plainly.", email, r)
		}
	}
	if !norm.NFKC.IsNormalString(email) {
		return notShown("%+q holds characters written in a compatibility form (such as fullwidth letters); type the address plainly.", email)
	}
	local, domain, _ := strings.Cut(email, "@")
	for _, part := range append([]string{local}, strings.Split(domain, ".")...) {
		if a, b, mixed := mixedScripts(part); mixed {
			return notShown("%+q mixes letters of the %s and %s scripts in %+q, which can pass for another address; type it in one script.", email, a, b, part)
		}
	}
	return nil
}

func notShown(format string, args ...any) error {
	e := ops.Errorf(ops.EINVALID, format, args...)
	e.Reason = ReasonEmailNotShown
	return e
}

// mixedScripts reports two scripts whose letters s mixes, leaving aside the mixes that
// Japanese (Han, Hiragana, Katakana) and Korean (Han, Hangul) writing makes.
func mixedScripts(s string) (string, string, bool) {
	seen := map[string]bool{}
	for _, r := range s {
		if !unicode.IsLetter(r) {
			continue
		}
		if sc := scriptOf(r); sc != "" {
			seen[sc] = true
		}
	}
	if len(seen) < 2 {
		return "", "", false
	}
	var names []string
	for sc := range seen {
		names = append(names, sc)
	}
	if cjk := (map[string]bool{"Han": true, "Hiragana": true, "Katakana": true, "Hangul": true}); len(names) <= 3 {
		all := true
		for _, n := range names {
			all = all && cjk[n]
		}
		if all && !(seen["Hangul"] && (seen["Hiragana"] || seen["Katakana"])) {
			return "", "", false
		}
	}
	sort.Strings(names)
	return names[0], names[1], true
}

// scriptOf names the script of letter r, or "" for one every script uses.
func scriptOf(r rune) string {
	for name, table := range unicode.Scripts {
		if name != "Common" && name != "Inherited" && unicode.Is(table, r) {
			return name
		}
	}
	return ""
}
