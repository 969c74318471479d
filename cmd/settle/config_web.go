package main

import (
	"net/netip"
	"strings"
)

// WebConfig is what the HTTP listener of serve and demo needs to know about its clients.
type WebConfig struct {
	// TrustedProxies is SETTLE_TRUSTED_PROXIES: the reverse proxies whose X-Forwarded-For
	// names the client that sign-in throttling counts.
	TrustedProxies []netip.Prefix
}

// loadWebEnv reads the settings of the HTTP listener of serve and demo.
func loadWebEnv(wc *WebConfig, getenv func(string) string) error {
	wc.TrustedProxies = nil
	for _, s := range strings.Split(getenv("SETTLE_TRUSTED_PROXIES"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return usagef("SETTLE_TRUSTED_PROXIES: %q is not an address or a network such as 10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		wc.TrustedProxies = append(wc.TrustedProxies, p.Masked())
	}
	return nil
}
