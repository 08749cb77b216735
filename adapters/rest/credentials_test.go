package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/secrets"
)

// Secret values the tests look for in every error and message.
const (
	envToken     = "env-t0ken-0123456789"
	clientSecret = "cl1ent-s3cret-abcdef"
)

// credAPI is a job API behind an authorization check, with an OAuth 2.0
// token endpoint at /token. It accepts the Authorization values in valid
// and answers others 401, echoing the value it got, as careless APIs do.
type credAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	valid     map[string]bool
	seen      []string // Authorization of each API request, in order
	users     []string // X-User of each API request
	tokenReqs int
	tokenErr  int    // when set, the token endpoint answers this status
	echo      string // the status answer's message
	expiresIn int    // the tokens' lifetime in seconds; 0: 3600
}

func newCredAPI(t *testing.T) *credAPI {
	t.Helper()
	api := &credAPI{t: t, valid: map[string]bool{}}
	api.srv = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.srv.Close)
	return api
}

func (api *credAPI) serve(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	defer api.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/token" {
		api.token(w, r)
		return
	}
	auth := r.Header.Get("Authorization")
	api.seen = append(api.seen, auth)
	api.users = append(api.users, r.Header.Get("X-User"))
	if !api.valid[auth] {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message":"invalid credentials %q"}`, auth)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/jobs":
		fmt.Fprint(w, `{"id":"j1"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/api/jobs/j1":
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "running", "message": api.echo})
	default:
		http.NotFound(w, r)
	}
}

// token is the token endpoint: client credentials with HTTP Basic.
func (api *credAPI) token(w http.ResponseWriter, r *http.Request) {
	api.tokenReqs++
	id, secret, _ := r.BasicAuth()
	if err := r.ParseForm(); err != nil {
		api.t.Errorf("token request: %v", err)
	}
	if api.tokenErr != 0 {
		w.WriteHeader(api.tokenErr)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"client %s with secret %s is unknown"}`, id, secret)
		return
	}
	if got := r.PostForm.Get("grant_type"); got != "client_credentials" || id != "jobs-client" || secret != clientSecret ||
		r.PostForm.Get("scope") != "jobs.run jobs.read" || r.PostForm.Get("audience") != "https://jobs.example.com" {
		api.t.Errorf("token request: grant_type %q, client %q, right secret %v, form %v", got, id, secret == clientSecret, r.PostForm)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	tok := fmt.Sprintf("acc3ss-t0ken-%d", api.tokenReqs)
	api.valid["Bearer "+tok] = true
	exp := api.expiresIn
	if exp == 0 {
		exp = 3600
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": exp})
}

// accept makes the API accept the Authorization value v (and only it).
func (api *credAPI) accept(v string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.valid = map[string]bool{v: true}
}

// revokeAll makes the API refuse every token issued so far.
func (api *credAPI) revokeAll() {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.valid = map[string]bool{}
}

func (api *credAPI) requests() (seen, users []string, tokenReqs int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return append([]string(nil), api.seen...), append([]string(nil), api.users...), api.tokenReqs
}

func (api *credAPI) backend(headers map[string]string) BackendConfig {
	return BackendConfig{
		BaseURL:       api.srv.URL + "/api",
		Headers:       headers,
		AllowNetworks: []string{"127.0.0.1/32"},
		MaxRetries:    new(0),
	}
}

func (api *credAPI) oauth() *OAuth2Config {
	return &OAuth2Config{
		TokenURL:       api.srv.URL + "/token",
		ClientID:       "jobs-client",
		ClientSecret:   "${CLIENT_SECRET}",
		Scopes:         []string{"jobs.run", "jobs.read"},
		EndpointParams: map[string]string{"audience": "https://jobs.example.com"},
		AuthStyle:      "header",
	}
}

func credJob() JobConfig {
	return JobConfig{
		Start:  Call{Path: "/jobs"},
		JobID:  JobIDConfig{Field: "id"},
		Status: StatusConfig{Call: Call{Path: "/jobs/{job.id}"}, Field: "status", Message: "message", States: map[string]string{"running": "working", "done": "succeeded"}},
	}
}

func credEnv(name string) (string, bool) {
	switch name {
	case "JOBS_TOKEN":
		return envToken, true
	case "CLIENT_SECRET":
		return clientSecret, true
	}
	return "", false
}

func newCredAdapter(t *testing.T, api *credAPI, backend BackendConfig) *Adapter {
	t.Helper()
	a, err := New("jobs", backend, map[string]JobConfig{"job": credJob()}, &Options{
		HTTPClient:   api.srv.Client(),
		Getenv:       credEnv,
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 2 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// startAndPoll starts a job and polls it once, returning the observation.
func startAndPoll(t *testing.T, a *Adapter) adapters.Observation {
	t.Helper()
	ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return pollOnce(t, a, ref)
}

func pollOnce(t *testing.T, a *Adapter, ref adapters.JobRef) adapters.Observation {
	t.Helper()
	obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return obs[0]
}

func writeSecret(t *testing.T, path, content string, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// assertNoSecrets fails when text contains one of the secrets.
func assertNoSecrets(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range append(secrets, envToken, clientSecret) {
		if strings.Contains(text, s) {
			t.Errorf("%s carries the secret %q: %s", what, s, text)
		}
	}
}

func TestFileSecretRotation(t *testing.T) {
	api := newCredAPI(t)
	path := filepath.Join(t.TempDir(), "token")
	t0 := time.Now().Add(-time.Hour)
	writeSecret(t, path, "f1le-t0ken-AAAA\n", t0)
	api.accept("Bearer f1le-t0ken-AAAA")
	a := newCredAdapter(t, api, api.backend(map[string]string{"Authorization": "Bearer ${file:" + path + "}"}))

	ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if o := pollOnce(t, a, ref); o.Err != nil || o.State != adapters.StateWorking {
		t.Fatalf("poll with token A: %+v", o)
	}

	// The file is rotated (as the kubelet rotates a service-account token):
	// the next request carries the new token, without a 401 first.
	writeSecret(t, path, "f1le-t0ken-BBBBBB\n", t0.Add(time.Minute))
	api.accept("Bearer f1le-t0ken-BBBBBB")
	if o := pollOnce(t, a, ref); o.Err != nil || o.State != adapters.StateWorking {
		t.Fatalf("poll with token B: %+v", o)
	}
	seen, _, _ := api.requests()
	want := []string{"Bearer f1le-t0ken-AAAA", "Bearer f1le-t0ken-AAAA", "Bearer f1le-t0ken-BBBBBB"}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("Authorization sent: %q, want %q", seen, want)
	}
}

func TestStaleSecretRefreshedAfter401(t *testing.T) {
	// The file changes without its modification time or size changing (a
	// coarse clock): the adapter sends the cached token, is answered 401,
	// re-reads the file and sends the request once more. A start, too: a
	// 401 says that the request was not applied.
	api := newCredAPI(t)
	path := filepath.Join(t.TempDir(), "token")
	t0 := time.Now().Add(-time.Hour)
	writeSecret(t, path, "f1le-t0ken-AAAA", t0)
	api.accept("Bearer f1le-t0ken-AAAA")
	a := newCredAdapter(t, api, api.backend(map[string]string{"Authorization": "Bearer ${file:" + path + "}"}))
	if _, err := a.creds.secret(expr.SecretRef{File: path}); err != nil {
		t.Fatal(err)
	}

	writeSecret(t, path, "f1le-t0ken-BBBB", t0)
	api.accept("Bearer f1le-t0ken-BBBB")
	ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err != nil {
		t.Fatalf("Start after the token expired: %v", err)
	}

	writeSecret(t, path, "f1le-t0ken-CCCC", t0)
	api.accept("Bearer f1le-t0ken-CCCC")
	if o := pollOnce(t, a, ref); o.Err != nil || o.State != adapters.StateWorking {
		t.Fatalf("poll after the token expired: %+v", o)
	}
	seen, _, _ := api.requests()
	want := []string{
		"Bearer f1le-t0ken-AAAA", "Bearer f1le-t0ken-BBBB", // start: 401, then the retry
		"Bearer f1le-t0ken-BBBB", "Bearer f1le-t0ken-CCCC", // poll: 401, then the retry
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("Authorization sent: %q, want %q", seen, want)
	}
}

func TestSecond401IsReported(t *testing.T) {
	api := newCredAPI(t)
	path := filepath.Join(t.TempDir(), "token")
	writeSecret(t, path, "f1le-t0ken-AAAA\n", time.Now().Add(-time.Hour))
	api.accept("Bearer f1le-t0ken-AAAA")
	a := newCredAdapter(t, api, api.backend(map[string]string{"Authorization": "Bearer ${file:" + path + "}"}))
	ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}

	api.revokeAll()
	o := pollOnce(t, a, ref)
	if o.Err == nil || !strings.Contains(o.Err.Error(), "answered 401") {
		t.Fatalf("poll with a revoked token: %+v, want an error saying answered 401", o)
	}
	assertNoSecrets(t, "the error", o.Err.Error(), "f1le-t0ken-AAAA")
	if seen, _, _ := api.requests(); len(seen) != 3 {
		t.Errorf("the API got %d requests (%q), want 3: the start, the poll and its one retry", len(seen), seen)
	}
}

func TestStaticSecretIsNotRetriedAfter401(t *testing.T) {
	// An environment variable is read once: repeating the request could not
	// change anything.
	api := newCredAPI(t)
	a := newCredAdapter(t, api, api.backend(map[string]string{"Authorization": "Bearer ${JOBS_TOKEN}"}))
	_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err == nil || !strings.Contains(err.Error(), "answered 401") {
		t.Fatalf("Start: %v, want a refusal saying answered 401", err)
	}
	assertNoSecrets(t, "the error", err.Error())
	if seen, _, _ := api.requests(); len(seen) != 1 {
		t.Errorf("the API got %d requests, want 1", len(seen))
	}
}

func TestOAuthClientCredentials(t *testing.T) {
	api := newCredAPI(t)
	backend := api.backend(nil)
	backend.OAuth2 = api.oauth()
	a := newCredAdapter(t, api, backend)
	now := time.Now()
	var clock sync.Mutex
	a.creds.oauth.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); defer clock.Unlock(); now = now.Add(d) }

	ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Several jobs polled at once share the cached token.
	refs := []adapters.JobRef{ref, ref, ref, ref, ref}
	for range 3 {
		obs, err := a.Poll(t.Context(), refs)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, o := range obs {
			if o.Err != nil || o.State != adapters.StateWorking {
				t.Fatalf("poll: %+v", o)
			}
		}
	}
	if _, _, n := api.requests(); n != 1 {
		t.Errorf("%d token requests for 16 API requests within the token's life, want 1", n)
	}

	// Shortly before it expires the token is renewed.
	advance(3600*time.Second - 5*time.Second)
	if o := pollOnce(t, a, ref); o.Err != nil {
		t.Fatalf("poll after expiry: %v", o.Err)
	}
	if o := pollOnce(t, a, ref); o.Err != nil {
		t.Fatalf("second poll after expiry: %v", o.Err)
	}
	if _, _, n := api.requests(); n != 2 {
		t.Errorf("%d token requests after the first token expired, want 2", n)
	}

	// The API stops accepting the token before its expiry: the 401 drops it,
	// a new one is fetched and the poll succeeds.
	api.revokeAll()
	if o := pollOnce(t, a, ref); o.Err != nil || o.State != adapters.StateWorking {
		t.Fatalf("poll after the token was revoked: %+v", o)
	}
	seen, _, n := api.requests()
	if n != 3 {
		t.Errorf("%d token requests after a 401, want 3", n)
	}
	if last := seen[len(seen)-1]; last != "Bearer acc3ss-t0ken-3" {
		t.Errorf("the retry carried %q, want the new token", last)
	}
	if got := seen[len(seen)-2]; got != "Bearer acc3ss-t0ken-2" {
		t.Errorf("the rejected request carried %q, want the old token", got)
	}
}

func TestOAuthConcurrent401sFetchOneToken(t *testing.T) {
	api := newCredAPI(t)
	backend := api.backend(nil)
	backend.OAuth2 = api.oauth()
	a := newCredAdapter(t, api, backend)
	ref, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	api.revokeAll()
	obs, err := a.Poll(t.Context(), []adapters.JobRef{ref, ref, ref, ref, ref, ref, ref, ref})
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	for _, o := range obs {
		if o.Err != nil {
			t.Fatalf("poll: %v", o.Err)
		}
	}
	// Each 401 drops only the token it was answered to, never the new one.
	if _, _, n := api.requests(); n != 2 {
		t.Errorf("%d token requests, want 2 (the first token, and one after the 401s)", n)
	}
}

func TestNoSecretInErrorsOrMessages(t *testing.T) {
	t.Run("echoed in an observation", func(t *testing.T) {
		api := newCredAPI(t)
		path := filepath.Join(t.TempDir(), "token")
		writeSecret(t, path, "f1le-s3cret-9876\n", time.Now())
		backend := api.backend(map[string]string{"X-Env": "${JOBS_TOKEN}", "X-File": "${file:" + path + "}", "X-User": "alice"})
		backend.OAuth2 = api.oauth()
		a := newCredAdapter(t, api, backend)
		api.echo = "env " + envToken + ", file f1le-s3cret-9876, client " + clientSecret + ", token acc3ss-t0ken-1, user alice"
		o := startAndPoll(t, a)
		if o.Err != nil {
			t.Fatalf("poll: %v", o.Err)
		}
		assertNoSecrets(t, "the status message", o.Message, "f1le-s3cret-9876", "acc3ss-t0ken-1")
		// A literal header value (a user name) is not a secret.
		if !strings.Contains(o.Message, "user alice") {
			t.Errorf("status message %q: the literal header value alice was redacted", o.Message)
		}
		if _, users, _ := api.requests(); len(users) == 0 || users[0] != "alice" {
			t.Errorf("X-User sent: %q", users)
		}
	})
	t.Run("token endpoint refuses", func(t *testing.T) {
		api := newCredAPI(t)
		api.tokenErr = http.StatusUnauthorized
		backend := api.backend(nil)
		backend.OAuth2 = api.oauth()
		a := newCredAdapter(t, api, backend)
		_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
		if err == nil {
			t.Fatal("Start succeeded without a token")
		}
		assertNoSecrets(t, "the error", err.Error())
		for _, want := range []string{"POST /api/jobs was not sent", "/token", "HTTP 401", "invalid_client"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if seen, _, _ := api.requests(); len(seen) != 0 {
			t.Errorf("the API got a request without a token: %q", seen)
		}
	})
	t.Run("token endpoint not allowed", func(t *testing.T) {
		api := newCredAPI(t)
		backend := api.backend(nil)
		backend.OAuth2 = api.oauth()
		backend.OAuth2.TokenURL = strings.Replace(api.srv.URL, "127.0.0.1", "127.0.0.2", 1) + "/token"
		a := newCredAdapter(t, api, backend)
		_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "job", CorrelationID: "jb-1"})
		if !errors.Is(err, ErrAddressDenied) {
			t.Fatalf("Start with a token endpoint outside allow_networks: %v, want ErrAddressDenied", err)
		}
		assertNoSecrets(t, "the error", err.Error())
	})
	t.Run("bad references at start", func(t *testing.T) {
		api := newCredAPI(t)
		dir := t.TempDir()
		broken := filepath.Join(dir, "broken")
		writeSecret(t, broken, "f1le-s3cret\nsecond-line-s3cret\n", time.Now())
		backend := api.backend(map[string]string{
			"X-Missing-Env":  "${NO_SUCH_VAR}",
			"X-Missing-File": "${file:" + filepath.Join(dir, "absent") + "}",
			"X-Broken-File":  "${file:" + broken + "}",
		})
		_, err := New("jobs", backend, map[string]JobConfig{"job": credJob()}, &Options{HTTPClient: api.srv.Client(), Getenv: credEnv})
		if err == nil {
			t.Fatal("New accepted unresolvable secrets")
		}
		for _, want := range []string{"NO_SUCH_VAR is not set", dir + "/absent: no such file or directory", broken + " contains a line break"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		assertNoSecrets(t, "the error", err.Error(), "f1le-s3cret", "second-line-s3cret")
	})
}

func TestCredentialsOAuthDirect(t *testing.T) {
	api := newCredAPI(t)
	api.expiresIn = 60
	src := secrets.NewSource(&secrets.Options{Getenv: credEnv})
	red := src.Redactor()
	c, err := newCredentials(src, api.oauth(), api.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.oauth.now = func() time.Time { return now }
	authorize := func() string {
		t.Helper()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://jobs.example/", nil)
		if err := c.authorize(req); err != nil {
			t.Fatalf("authorize: %v", err)
		}
		return req.Header.Get("Authorization")
	}
	if got := authorize(); got != "Bearer acc3ss-t0ken-1" {
		t.Errorf("Authorization = %q", got)
	}
	authorize()
	now = now.Add(49 * time.Second)
	authorize()
	if _, _, n := api.requests(); n != 1 {
		t.Errorf("%d token requests within the token's life, want 1", n)
	}
	now = now.Add(2 * time.Second) // less than 10s before expiry
	if got := authorize(); got != "Bearer acc3ss-t0ken-2" {
		t.Errorf("near expiry, Authorization = %q, want a new token", got)
	}
	c.refreshRejected("Bearer acc3ss-t0ken-1") // an old token's 401: keeps the new one
	authorize()
	c.refresh()
	if got := authorize(); got != "Bearer acc3ss-t0ken-3" {
		t.Errorf("after refresh, Authorization = %q, want a new token", got)
	}
	if got := red.Redact("acc3ss-t0ken-1 acc3ss-t0ken-3 " + clientSecret); strings.Contains(got, "t0ken") || strings.Contains(got, clientSecret) {
		t.Errorf("tokens or the client secret not redacted: %q", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c.refresh()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://jobs.example/", nil)
	if err := c.authorize(req); !errors.Is(err, context.Canceled) {
		t.Errorf("authorize with an ended context: %v", err)
	}
}

func TestOAuth2ConfigValidate(t *testing.T) {
	good := OAuth2Config{TokenURL: "https://login.example.com/oauth2/token?api-version=2", ClientID: "${CLIENT_ID}", ClientSecret: "${file:/var/run/secrets/client-secret}"}
	for _, tc := range []struct {
		name   string
		change func(*OAuth2Config)
		want   []string // "path: message" fragments
	}{
		{"valid", func(*OAuth2Config) {}, nil},
		{"literal id and params", func(c *OAuth2Config) {
			c.ClientID = "jobs"
			c.AuthStyle = "params"
			c.Scopes = []string{"a", "b:c"}
			c.EndpointParams = map[string]string{"audience": "x"}
		}, nil},
		{"missing", func(c *OAuth2Config) { *c = OAuth2Config{} }, []string{"token_url: required", "client_id: required", "client_secret: required"}},
		{"relative URL", func(c *OAuth2Config) { c.TokenURL = "/token" }, []string{"token_url: must be an absolute"}},
		{"userinfo", func(c *OAuth2Config) { c.TokenURL = "https://id:" + clientSecret + "@login.example.com/token" }, []string{"token_url: must not carry credentials"}},
		{"bad reference", func(c *OAuth2Config) { c.ClientID = "${file:relative}" }, []string{"client_id: ${file:relative} needs an absolute file path"}},
		{"placeholder in the secret", func(c *OAuth2Config) { c.ClientSecret = "cl1ent-{s3cret}-abcdef" }, []string{"client_secret: is not text with"}},
		{"line break", func(c *OAuth2Config) { c.ClientSecret = clientSecret + "\n" }, []string{"client_secret: contains a line break"}},
		{"scope with a space", func(c *OAuth2Config) { c.Scopes = []string{"ok", "two words"} }, []string{"scopes[1]: a scope is one"}},
		{"reserved param", func(c *OAuth2Config) { c.EndpointParams = map[string]string{"client_secret": "x", "": "y"} }, []string{"endpoint_params.client_secret: is set by the adapter", "endpoint_params: empty parameter name"}},
		{"auth style", func(c *OAuth2Config) { c.AuthStyle = "basic" }, []string{`auth_style: "basic" is not one of header, params`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted it, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want %q", err, w)
				}
			}
			assertNoSecrets(t, "Validate's error", err.Error(), "s3cret")
			var fe *adapters.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate's error is not a FieldError: %v", err)
			}
		})
	}

	// In a backend block the paths are under oauth2.
	b := BackendConfig{BaseURL: "https://jobs.example.com", OAuth2: &OAuth2Config{TokenURL: "ftp://x", ClientID: "jobs"}}
	err := b.Validate()
	var paths []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *adapters.FieldError
		if errors.As(e, &fe) {
			paths = append(paths, fe.Path)
		}
	}
	walk(err)
	if got, want := strings.Join(paths, ","), "oauth2.token_url,oauth2.client_secret"; got != want {
		t.Errorf("BackendConfig.Validate paths = %s, want %s (%v)", got, want, err)
	}
}
