package main

import "time"

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

// envOr reads key, def when it is unset.
func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
