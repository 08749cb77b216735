package githubactions

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// TestWebhookSecretRotates: a webhook secret read from a file is read again
// when the file changes, as the other backends' secrets are, so that a
// rotated secret takes effect without a restart: a delivery signed with the
// new secret is accepted and one signed with the old is refused as forged.
func TestWebhookSecretRotates(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	path := filepath.Join(t.TempDir(), "webhook-secret")
	write := func(content string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	signed := func(secret string) adapters.Delivery {
		body := []byte(`{"zen":"Keep it logically awesome."}`)
		d := delivery("ping", "g-"+secret, body)
		d.Header.Set("X-Hub-Signature-256", "sha256="+mac(sha256.New, secret, body))
		d.Header.Del("X-Hub-Signature")
		return d
	}
	const rotated = "whsec-R0tatedSecretValue"
	t0 := time.Now().Add(-time.Hour)
	write(testWebhookSecret, t0)
	a := f.adapter(func(b *BackendConfig, _ map[string]JobConfig) {
		b.Events = &EventsConfig{Secret: "${file:" + path + "}"}
	})
	if _, err := a.ReadEvents(t.Context(), signed(testWebhookSecret)); err != nil {
		t.Fatalf("a delivery signed with the secret: %v", err)
	}
	write(rotated, t0.Add(time.Minute))
	if _, err := a.ReadEvents(t.Context(), signed(rotated)); err != nil {
		t.Errorf("a delivery signed with the rotated secret: %v, want it accepted", err)
	}
	if _, err := a.ReadEvents(t.Context(), signed(testWebhookSecret)); !errors.Is(err, adapters.ErrForgedEvent) {
		t.Errorf("a delivery signed with the old secret after the rotation: %v, want adapters.ErrForgedEvent", err)
	}
	if got := a.red.Redact("old " + testWebhookSecret + " new " + rotated); strings.Contains(got, "whsec") {
		t.Errorf("the secrets are not redacted: %q", got)
	}
}
