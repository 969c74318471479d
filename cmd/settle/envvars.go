package main

import "net/url"

// checkHTTPURL refuses s, the value of the setting, unless it is empty or an http(s) URL
// with a host. A URL may hold a password or a token (a Slack webhook's path is its secret),
// so the refusal names the setting and never repeats the value.
func checkHTTPURL(setting *setting, s string) error {
	if s == "" {
		return nil
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("%s holds a value that is not an http(s) URL", setting.Name)
	}
	return nil
}
