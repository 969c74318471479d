package main

import (
	"math"
	"net/url"
	"strconv"
	"time"
)

// durationEnv reads key as a positive Go duration, def when it is unset.
func durationEnv(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("%s=%q is not a positive Go duration such as 8s or 1m", key, v)
	}
	return d, nil
}

// checkHTTPURL refuses s, the value of the setting name, unless it is empty or an http(s)
// URL with a host. A URL may hold a password or a token (a Slack webhook's path is its
// secret), so the refusal names the setting and never repeats the value.
func checkHTTPURL(name, s string) error {
	if s == "" {
		return nil
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("%s holds a value that is not an http(s) URL", name)
	}
	return nil
}

// envOr reads key, def when it is unset.
func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// rateEnv reads key as a positive number of reads per second, def when it is unset.
func rateEnv(getenv func(string) string, key string, def float64) (float64, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, usagef("%s=%q is not a positive number of reads per second such as 20 or 2.5", key, v)
	}
	return f, nil
}
