package ops

import "bytes"

// PostgreSQL's jsonb refuses two escapes that JSON allows: \u0000, since its text holds no
// NUL, and a UTF-16 surrogate escaped without its other half ("\ud83d" alone), which names
// no character. A client's request holding one is refused (CheckJSONText); a provider's
// answer holding one, which a model's text may, is stored with each replaced (StorableJSON).

// refusedEscape finds the first escape at or after i in JSON text b that PostgreSQL
// refuses and returns where it starts and ends, and whether it is a NUL; start is -1 when
// there is none. A backslash stands only inside a string in JSON, so every one starts an
// escape and no string state is kept.
func refusedEscape(b []byte, i int) (start, end int, nul bool) {
	for {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 || i+j+1 >= len(b) {
			return -1, -1, false
		}
		at := i + j
		u, ok := hex4(b, at)
		if !ok {
			i = at + 2 // any other escape, \\ included: two bytes
			continue
		}
		switch {
		case u == 0:
			return at, at + 6, true
		case u >= 0xdc00 && u < 0xe000:
			return at, at + 6, false
		case u >= 0xd800 && u < 0xdc00:
			if low, ok := hex4(b, at+6); !ok || low < 0xdc00 || low >= 0xe000 {
				return at, at + 6, false
			}
			i = at + 12
			continue
		}
		i = at + 6
	}
}

// hex4 reads the code unit of the \uXXXX escape at b[at:], when there is one.
func hex4(b []byte, at int) (rune, bool) {
	if at+6 > len(b) || b[at] != '\\' || b[at+1] != 'u' {
		return 0, false
	}
	var u rune
	for _, c := range b[at+2 : at+6] {
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			u = u<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return u, true
}

// StorableJSON returns the JSON text b with every escape PostgreSQL refuses replaced by
// \ufffd, the replacement character, which is what a JSON decoder makes of half a pair
// anyway; b itself when it holds none. It is for text Settle must keep although it did not
// choose it, such as a provider's answer that was already billed: refusing to store it
// would leave its operation open for a resend that bills again.
func StorableJSON(b []byte) []byte {
	start, end, _ := refusedEscape(b, 0)
	if start < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	last := 0
	for start >= 0 {
		out = append(append(out, b[last:start]...), `\ufffd`...)
		last = end
		start, end, _ = refusedEscape(b, end)
	}
	return append(out, b[last:]...)
}
