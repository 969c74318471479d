package web

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Sign-in throttling. Wrong passwords are counted per account at one client address, and
// per client address over all accounts. Past a key's free failures each further one makes
// that key wait, 1 s doubling up to a minute, and an attempt within the wait is refused
// without checking the password. Nothing is counted per account alone: that count would
// let anyone who knows an email keep its owner out from everywhere. A wait never outlasts
// a minute, so nobody is locked out for good; the state lives in this process's memory.
const (
	// loginPairFree is how many wrong passwords an account may get from one address
	// before waits start: room for a typo or two and a caps-lock.
	loginPairFree = 3
	// loginAddressFree is the same over all accounts from one address: enough for an
	// office behind one NAT, too few to try a common password on every account.
	loginAddressFree = 20
	loginBaseDelay   = time.Second
	loginMaxDelay    = time.Minute
	// loginForget drops a count after an hour without a wrong password.
	loginForget = time.Hour
	// loginMaxKeys bounds each map's memory (about 100 bytes a key). When it is full of
	// counts still in use, a new key goes uncounted rather than evicting a waiting one.
	loginMaxKeys = 100_000
)

// strikes is the count of one key: an account at an address, or an address.
type strikes struct {
	fails    int       // wrong passwords since the last success or the last forgetting
	last     time.Time // of the latest wrong password
	until    time.Time // no attempt is admitted before this
	inflight int       // attempts admitted and not yet answered
	reported bool      // a refusal within the current wait is already in the audit log
}

// blocked says how long an attempt on s must wait, and whether it is the first refused
// within this wait. Admitted attempts still running count as failures to come, so a burst
// of parallel guesses cannot overtake the count: past the free failures, one at a time.
func (s *strikes) blocked(now time.Time, free int) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	w := s.until.Sub(now)
	if w <= 0 {
		if s.inflight < max(1, free-s.fails) {
			return 0, false
		}
		w = time.Second // the running check answers within a hash's time
	}
	first := !s.reported
	s.reported = true
	return w, first
}

// strike counts a wrong password and returns the count and the wait it sets.
func (s *strikes) strike(now time.Time, free int) (int, time.Duration) {
	if s == nil {
		return 0, 0
	}
	s.fails++
	s.last = now
	d := loginDelay(s.fails, free)
	if u := now.Add(d); u.After(s.until) {
		s.until = u
	}
	s.reported = false
	return s.fails, d
}

// loginDelay is the wait after fails wrong passwords: none up to free, then 1 s, 2 s,
// 4 s... and never more than a minute.
func loginDelay(fails, free int) time.Duration {
	n := fails - free
	switch {
	case n <= 0:
		return 0
	case n > 16:
		return loginMaxDelay
	}
	return min(loginBaseDelay<<(n-1), loginMaxDelay)
}

// loginThrottle holds the counts of one process.
type loginThrottle struct {
	clock ops.Clock
	mu    sync.Mutex
	pairs map[string]*strikes // account + "\x00" + address
	addrs map[string]*strikes
	swept time.Time
}

func newLoginThrottle(clock ops.Clock) *loginThrottle {
	return &loginThrottle{clock: clock, pairs: map[string]*strikes{}, addrs: map[string]*strikes{}}
}

// loginAttempt is one admitted sign-in; fail, succeed or abandon ends it, once.
type loginAttempt struct {
	t             *loginThrottle
	pairKey, addr string
	pair, address *strikes // nil when uncounted
}

// loginFailure is what one wrong password changed.
type loginFailure struct {
	failures, addressFailures int
	wait                      time.Duration
}

// admit lets an attempt at account from addr run, or says how long to wait and whether
// this refusal is the first of its wait (the one worth an audit row).
func (t *loginThrottle) admit(account, addr string) (a *loginAttempt, wait time.Duration, first bool) {
	now := t.clock.Now()
	key := account + "\x00" + addr
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ad := t.get(t.pairs, key, now), t.get(t.addrs, addr, now)
	wp, fp := p.blocked(now, loginPairFree)
	wa, fa := ad.blocked(now, loginAddressFree)
	if wait = max(wp, wa); wait > 0 {
		return nil, wait, fp || fa
	}
	if p == nil {
		p = t.add(t.pairs, key, now)
	}
	if ad == nil {
		ad = t.add(t.addrs, addr, now)
	}
	for _, s := range []*strikes{p, ad} {
		if s != nil {
			s.inflight++
		}
	}
	return &loginAttempt{t: t, pairKey: key, addr: addr, pair: p, address: ad}, 0, false
}

// get returns key's count, first forgetting one idle for loginForget.
func (t *loginThrottle) get(m map[string]*strikes, key string, now time.Time) *strikes {
	s := m[key]
	if s != nil && now.Sub(s.last) >= loginForget && !now.Before(s.until) {
		s.fails, s.reported = 0, false
		if s.inflight == 0 {
			delete(m, key)
			return nil
		}
	}
	return s
}

// add starts a count for key, or returns nil when the map is full of counts in use.
func (t *loginThrottle) add(m map[string]*strikes, key string, now time.Time) *strikes {
	if len(m) >= loginMaxKeys && now.Sub(t.swept) >= time.Second {
		// Forgotten counts go first; then, if still full, counts whose wait is over,
		// which gives their keys back only their free failures.
		t.swept = now
		for _, forgettable := range []func(*strikes) bool{
			func(s *strikes) bool { return now.Sub(s.last) >= loginForget },
			func(*strikes) bool { return len(m) >= loginMaxKeys*9/10 },
		} {
			for k, s := range m {
				if s.inflight == 0 && !now.Before(s.until) && forgettable(s) {
					delete(m, k)
				}
			}
		}
	}
	if len(m) >= loginMaxKeys {
		return nil
	}
	s := &strikes{}
	m[key] = s
	return s
}

// fail counts a wrong password on both keys and returns the wait it sets.
func (a *loginAttempt) fail() loginFailure {
	now := a.t.clock.Now()
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	var f loginFailure
	var wp, wa time.Duration
	f.failures, wp = a.pair.strike(now, loginPairFree)
	f.addressFailures, wa = a.address.strike(now, loginAddressFree)
	f.wait = max(wp, wa)
	a.release()
	return f
}

// succeed starts the account's count at this address again. The address's count stays:
// signing in to one's own account must not buy guesses at others.
func (a *loginAttempt) succeed() {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	if a.pair != nil {
		a.pair.fails, a.pair.until, a.pair.reported = 0, time.Time{}, false
	}
	a.release()
}

// abandon ends an attempt whose password was never judged (busy, or an error).
func (a *loginAttempt) abandon() {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	a.release()
}

// release must be called with the lock held; a count back at zero is dropped.
func (a *loginAttempt) release() {
	for _, k := range []struct {
		m   map[string]*strikes
		key string
		s   *strikes
	}{{a.t.pairs, a.pairKey, a.pair}, {a.t.addrs, a.addr, a.address}} {
		if k.s == nil {
			continue
		}
		k.s.inflight--
		if k.s.inflight == 0 && k.s.fails == 0 && k.m[k.key] == k.s {
			delete(k.m, k.key)
		}
	}
}

// loginAccount is the throttling key of the email a sign-in names, normalised as
// Authenticate does, and bounded so a huge form field cannot be a huge key.
func loginAccount(email string) string {
	e := strings.ToLower(strings.TrimSpace(email))
	if len(e) > 320 {
		e = e[:320]
	}
	return e
}

// clientAddr is who a sign-in comes from: the connection's peer or, when that peer is one
// of the trusted proxies, the nearest address in X-Forwarded-For that is not. Anyone else's
// X-Forwarded-For is ignored, so it cannot be forged to dodge the count. An IPv6 client
// counts by its /64, which a single host usually holds whole.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := ap.Addr().Unmap().WithZone("")
	if isTrusted(addr, trusted) {
		addr = forwardedClient(r.Header.Values("X-Forwarded-For"), addr, trusted)
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// forwardedClient walks X-Forwarded-For from the right, where each trusted proxy appended
// the address it saw, to the first hop that is not a trusted proxy. A malformed hop stops
// the walk at the last proxy: what lies left of it was written by the client.
func forwardedClient(values []string, peer netip.Addr, trusted []netip.Prefix) netip.Addr {
	var hops []string
	for _, v := range values {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		a, err := netip.ParseAddr(h)
		if err != nil {
			ap, perr := netip.ParseAddrPort(h)
			if perr != nil {
				return peer
			}
			a = ap.Addr()
		}
		a = a.Unmap().WithZone("")
		if !isTrusted(a, trusted) {
			return a
		}
		peer = a
	}
	return peer
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
