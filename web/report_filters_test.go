package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// TestReportFiltersRefuseAProviderNoProviderHas: a provider filter pasted with a NUL, bytes
// that are not UTF-8 or another control character into the reconciliation report, its CSV
// export or the insights is answered with a page saying why, never a server error from the
// database; a plain provider name still filters.
func TestReportFiltersRefuseAProviderNoProviderHas(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	for _, page := range []string{"/reconcile", "/reconcile.csv", "/insights"} {
		for _, provider := range []string{"stripe\x00", "str\xffipe", "stripe\x1b[31m"} {
			resp, body := e.get(t, c, page+"?"+url.Values{"provider": {provider}}.Encode())
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "The provider filter holds a character") {
				t.Errorf("%s with provider %q = %d: %.300s", page, provider, resp.StatusCode, body)
			}
		}
		if resp, _ := e.get(t, c, page+"?provider=stripe"); resp.StatusCode != http.StatusOK {
			t.Errorf("%s with provider stripe = %d", page, resp.StatusCode)
		}
	}
}
