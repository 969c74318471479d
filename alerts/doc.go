// Package alerts holds alert rules, their evaluation, notifiers and the Prometheus export.
package alerts
