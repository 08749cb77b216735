package githubfake

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// ExchangesEnv names the environment variable that, when it names a
// directory at [New], makes the server append every HTTP exchange it serves
// to $JOBBRIDGE_EXCHANGES/github-<pid>.jsonl, one JSON object a line, so that
// the spec checks can validate the requests and answers against GitHub's
// OpenAPI description. Answers to faults a test injected carry
// "injected": true; bodies over 1 MiB are cut and carry "truncated": true.
// Dropped connections (no answer) and pre-signed log downloads under
// _blobs/ (not part of the REST API) are not recorded.
const ExchangesEnv = exchanges.Env

// record appends the exchange to the exchanges file, when recording is on.
// A failure to record is reported on stderr and does not fail the request.
func (s *Server) record(r *http.Request, reqBody []byte, resp response, injected bool) {
	if s.exchangeDir == "" || strings.HasPrefix(r.URL.Path, "/_blobs/") {
		return
	}
	e := exchanges.Exchange{
		Backend: "github", Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		RequestHeaders: exchanges.RedactHeaders(r.Header, exchanges.KeepScheme), Status: resp.status,
		ResponseHeaders: resp.header.Clone(), Injected: injected,
	}
	var cut bool
	e.RequestBody, cut = exchanges.Body(reqBody)
	e.Truncated = e.Truncated || cut
	respBody := resp.data
	if resp.body == nil {
		respBody = []byte(resp.text)
	}
	if resp.status == http.StatusNotModified || resp.status == http.StatusNoContent || resp.status == http.StatusFound {
		respBody = nil
	}
	e.ResponseBody, cut = exchanges.Body(respBody)
	e.Truncated = e.Truncated || cut
	if err := exchanges.Append(s.exchangeDir, e); err != nil {
		fmt.Fprintf(os.Stderr, "githubfake: recording an exchange: %v\n", err)
	}
}
