package main

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// minMetricsToken is the shortest SETTLE_METRICS_TOKEN accepted: a token anyone could guess
// would publish every tenant's figures as surely as none.
const minMetricsToken = 16

// WebConfig is what the HTTP listener of serve and demo needs to know about its clients.
type WebConfig struct {
	// MetricsAddr is SETTLE_METRICS_ADDR: when set, /metrics is served on a listener of its
	// own there, and not on the main one.
	MetricsAddr string
	// MetricsToken is SETTLE_METRICS_TOKEN: when set, /metrics answers only requests
	// bearing it. Without either, the main listener answers /metrics to loopback clients.
	MetricsToken string
	// TrustedProxies is SETTLE_TRUSTED_PROXIES: the reverse proxies whose X-Forwarded-For
	// names the client that sign-in throttling counts.
	TrustedProxies []netip.Prefix
	// SSO is single sign-on to the dashboard and whether password sign-in stays on.
	SSO SSOConfig
	// Approvals is the dashboard's global four-eyes policy (ops rule 13).
	Approvals ops.ApprovalPolicy
	// MaxInFlight is SETTLE_MAX_IN_FLIGHT: the API requests answered at once before more
	// are shed with 503; 0 is no cap.
	MaxInFlight int
	// MaxInFlightPerTenant is SETTLE_MAX_IN_FLIGHT_PER_TENANT: one tenant's share of
	// MaxInFlight, beyond which its requests are refused with 429; 0 is no share.
	MaxInFlightPerTenant int
	// MaxWriteBacklog is SETTLE_MAX_WRITE_BACKLOG: how long the ledger's writes may wait to
	// be sent before API requests are shed with 503; 0 is no limit.
	MaxWriteBacklog time.Duration
}

// defaultMaxInFlight is SETTLE_MAX_IN_FLIGHT's default: forty times what 500 gateway calls a
// second of 50 ms each keep in flight, so a healthy machine never sheds, while a starved
// one stops taking work before its backlog outgrows the soft memory limit.
const defaultMaxInFlight = 1000

// defaultMaxWriteBacklog is SETTLE_MAX_WRITE_BACKLOG's default: a healthy replica's ledger
// writes wait a few milliseconds for their batch, so a quarter of a second means the
// database or the CPU is behind, and shedding then keeps admitted calls from waiting seconds.
const defaultMaxWriteBacklog = 250 * time.Millisecond

// checkMetricsToken refuses a SETTLE_METRICS_TOKEN too short to be secret or holding spaces.
// The token is a secret: the message says what is wrong with it, never what it is.
func checkMetricsToken(t string) error {
	if t != "" && (len(t) < minMetricsToken || strings.ContainsAny(t, " \t\r\n")) {
		return usagef("%s must be at least %d characters with no spaces, e.g. the output of 'openssl rand -hex 32'", envMetricsToken.Name, minMetricsToken)
	}
	return nil
}

// loadWebEnv reads the settings of the HTTP listener of serve and demo; addr is the main
// listener's address.
func loadWebEnv(wc *WebConfig, addr string, e environ) error {
	wc.MetricsAddr, wc.MetricsToken = e.get(envMetricsAddr), e.get(envMetricsToken)
	if a := wc.MetricsAddr; a != "" {
		_, port, err := net.SplitHostPort(a)
		if err != nil || port == "" {
			return usagef("%s=%q is not host:port, e.g. 127.0.0.1:9090", envMetricsAddr.Name, a)
		}
		if a == addr && port != "0" {
			return usagef("%s=%q is the main listen address; give /metrics another port, or leave it unset", envMetricsAddr.Name, a)
		}
	}
	if err := checkMetricsToken(wc.MetricsToken); err != nil {
		return err
	}
	var err error
	if wc.MaxInFlight, err = readMaxInFlight(e); err != nil {
		return err
	}
	if wc.MaxInFlightPerTenant, err = readMaxInFlightPerTenant(e, wc.MaxInFlight); err != nil {
		return err
	}
	if wc.MaxWriteBacklog, err = readMaxWriteBacklog(e); err != nil {
		return err
	}
	if wc.Approvals, err = loadApprovalsEnv(e); err != nil {
		return err
	}
	wc.TrustedProxies = nil
	for _, s := range strings.Split(e.get(envTrustedProxies), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return usagef("%s: %q is not an address or a network such as 10.0.0.0/8", envTrustedProxies.Name, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		wc.TrustedProxies = append(wc.TrustedProxies, p.Masked())
	}
	return loadSSOEnv(&wc.SSO, e)
}

// readMaxInFlight reads SETTLE_MAX_IN_FLIGHT: a whole number of requests, 0 or off for no cap.
func readMaxInFlight(e environ) (int, error) {
	v := strings.TrimSpace(e.get(envMaxInFlight))
	switch v {
	case "":
		return defaultMaxInFlight, nil
	case "off":
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usagef("%s=%q is not a whole number of requests such as %d, or 0 or off for no cap", envMaxInFlight.Name, v, defaultMaxInFlight)
	}
	return n, nil
}

// readMaxInFlightPerTenant reads SETTLE_MAX_IN_FLIGHT_PER_TENANT: a whole number of
// requests up to maxInFlight, 0 or off for no share; unset, half of maxInFlight, so that
// one tenant's slow requests leave the other half of the places to the other tenants.
func readMaxInFlightPerTenant(e environ, maxInFlight int) (int, error) {
	v := strings.TrimSpace(e.get(envMaxInFlightPerTenant))
	switch v {
	case "":
		return maxInFlight / 2, nil
	case "off":
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usagef("%s=%q is not a whole number of requests such as %d, or 0 or off for no share", envMaxInFlightPerTenant.Name, v, defaultMaxInFlight/2)
	}
	if maxInFlight > 0 && n > maxInFlight {
		return 0, usagef("%s=%d is more than %s=%d, the requests the whole server takes at once; give it at most that, or 0 or off for no share",
			envMaxInFlightPerTenant.Name, n, envMaxInFlight.Name, maxInFlight)
	}
	return n, nil
}

// readMaxWriteBacklog reads SETTLE_MAX_WRITE_BACKLOG: a Go duration, 0 or off for no limit.
func readMaxWriteBacklog(e environ) (time.Duration, error) {
	v := strings.TrimSpace(e.get(envMaxWriteBacklog))
	switch v {
	case "":
		return defaultMaxWriteBacklog, nil
	case "off":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, usagef("%s=%q is not a duration such as %s, or 0 or off for no limit", envMaxWriteBacklog.Name, v, defaultMaxWriteBacklog)
	}
	return d, nil
}
