package githubactions

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// leakyServer wraps the fake and, for requests whose path contains leak,
// answers with an error message that quotes the request's Authorization
// header, as a misbehaving proxy might.
func leakyServer(t *testing.T, gh http.Handler, leak string, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, leak) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": fmt.Sprintf("rejected credentials %q for %s", r.Header.Get("Authorization"), r.URL.Path)})
			return
		}
		gh.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// TestTokenNeverLeaks checks that the token appears in no error, observation
// or log line, even when GitHub's answer quotes it.
func TestTokenNeverLeaks(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: longScripts()})
	var texts []string
	check := func(what string, err error) {
		if err != nil {
			texts = append(texts, what+": "+err.Error())
		}
	}

	for _, c := range []struct {
		leak   string
		status int
	}{{"/dispatches", 401}, {"/dispatches", 500}, {"/jobs", 500}, {"/cancel", 422}, {"/pending_deployments", 422}} {
		base := leakyServer(t, f.gh, c.leak, c.status)
		a := f.adapter(func(b *BackendConfig, _ map[string]JobConfig) { b.APIURL = base })
		_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "scripted", Arguments: map[string]any{"script": "long"}, CorrelationID: "corr-leak"})
		check("start", err)
		if err != nil {
			continue
		}
		ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-leak-2")
		o := f.pollErr(a, ref)
		check("poll", o.Err)
		texts = append(texts, o.Message)
		check("respond", a.Respond(t.Context(), ref, map[string]adapters.Answer{"deployment.1.5": {Action: "accept", Content: map[string]any{"decision": "approve"}}}))
		check("cancel", a.Cancel(t.Context(), ref))
	}
	if len(texts) < 5 {
		t.Fatalf("only %d errors to check; the leaky server was not reached: %q", len(texts), texts)
	}
	f.clock.Advance(time.Hour)
	texts = append(texts, f.logText())
	quoted := 0
	for _, s := range texts {
		if strings.Contains(s, testToken) || strings.Contains(s, testToken[4:20]) {
			t.Errorf("the token leaked: %s", s)
		}
		if strings.Contains(s, "[redacted]") {
			quoted++
		}
	}
	if quoted == 0 {
		t.Errorf("no error quoted the server's message (with the token redacted): %q", texts)
	}

	// An unset variable is named; nothing else is said about it.
	_, err := New("github", BackendConfig{Token: "${MISSING_TOKEN}"}, nil, &Options{Getenv: func(string) (string, bool) { return "", false }})
	if err == nil || !strings.Contains(err.Error(), "environment variable MISSING_TOKEN is not set") {
		t.Errorf("New with an unset token variable: %v", err)
	}
	// A token written into the catalog is refused without being quoted.
	_, err = New("github", BackendConfig{Token: testToken}, nil, nil)
	if err == nil || strings.Contains(err.Error(), testToken) || !strings.Contains(err.Error(), "token: must be a single ${NAME} reference") {
		t.Errorf("New with a literal token: %v", err)
	}
}

// TestWrongTokenIsNotTerminal checks that a 401 on a poll is an observation
// error (the bridge keeps the task), not a state.
func TestWrongTokenIsNotTerminal(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: longScripts(), fake: func(o *githubfake.Options) { o.Tokens = []string{"another-token"} }})
	a := f.adapter(nil)
	_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "scripted", Arguments: map[string]any{"script": "long"}, CorrelationID: "c"})
	if err == nil || !strings.Contains(err.Error(), "answered 401: Bad credentials") || strings.Contains(err.Error(), testToken) {
		t.Errorf("Start with a wrong token: %v", err)
	}
	o := f.pollErr(a, adapters.JobRef{ID: "1", Data: []byte(`{"tool":"scripted","owner":"o","repo":"r","run_id":1}`)})
	if o.Err == nil || o.State != 0 {
		t.Errorf("Poll with a wrong token: %v %v, want an observation error", o.State, o.Err)
	}
}
