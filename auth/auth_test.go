package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/auth/authtest"
)

const (
	testResource = "https://mcp.test/mcp"
	testMetadata = "https://mcp.test/.well-known/oauth-protected-resource"
	// testKey is an API key; its hash is in testConfig.
	testKey = "jbk_test-key-0123456789abcdefghijklmnopqrstuv"
)

// testNow is the fixed clock of the fixtures.
var testNow = time.Unix(1_900_000_000, 0)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	iss  *authtest.Issuer
	a    *Authenticator
	logs *syncBuffer
}

func testConfig(iss *authtest.Issuer) Config {
	return Config{
		Resource:        testResource,
		ScopesSupported: []string{"jobs:read", "jobs:run"},
		OAuth: &OAuthConfig{
			Issuer:      iss.URL(),
			JWKSURL:     iss.JWKSURL(),
			TenantClaim: "org",
			GroupsClaim: "groups",
		},
		APIKeys: &APIKeysConfig{Keys: []APIKey{
			{Name: "ci", SHA256: HashAPIKey(testKey), Tenant: "acme", Scopes: []string{"jobs:run"}, Groups: []string{"robots"}},
		}},
	}
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	f := &fixture{iss: authtest.NewIssuer(t), logs: &syncBuffer{}}
	cfg := testConfig(f.iss)
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := New(t.Context(), cfg, &Options{
		Now:    func() time.Time { return testNow },
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.a = a
	return f
}

// claims are the claims of a valid token for testResource, with changes
// (nil removes a claim).
func claims(changes map[string]any) map[string]any {
	c := map[string]any{
		"sub":    "alice",
		"aud":    testResource,
		"org":    "acme",
		"groups": []any{"ops", "dev"},
		"scope":  "jobs:read jobs:run",
	}
	maps.Copy(c, changes)
	return c
}

// serve sends a request through the middleware and returns the response
// and the principal the handler saw.
func (f *fixture) serve(t *testing.T, r *http.Request) (*http.Response, *Principal) {
	t.Helper()
	var got *Principal
	h := f.a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := PrincipalFrom(r.Context())
		if !ok {
			t.Error("handler reached without a principal")
		}
		got = p
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result(), got
}

func bearer(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

const (
	challengeMissing = `Bearer resource_metadata="` + testMetadata + `", scope="jobs:read jobs:run"`
	challengeInvalid = `Bearer error="invalid_token", resource_metadata="` + testMetadata + `", scope="jobs:read jobs:run"`
	challengeBad     = `Bearer error="invalid_request", resource_metadata="` + testMetadata + `", scope="jobs:read jobs:run"`
)

// TestTokenCorpus runs the token corpus of issue #6 through the middleware:
// each broken token is a 401 with the challenge and a reason that names the
// problem; valid ones reach the handler with their claims mapped.
func TestTokenCorpus(t *testing.T) {
	f := newFixture(t, nil)
	alice := &Principal{ID: f.iss.URL() + "|alice", Tenant: "acme", Scopes: []string{"jobs:read", "jobs:run"}, Groups: []string{"ops", "dev"}}
	at := authtest.At(testNow)
	tests := []struct {
		name   string
		token  func(*authtest.Issuer) string
		want   *Principal // nil: refused
		reason string
	}{
		{name: "valid RS256", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at) }, want: alice},
		{name: "valid ES256", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.Alg("ES256")) }, want: alice},
		{name: "audience with trailing slash", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"aud": testResource + "/"}), at)
		}, want: alice},
		{name: "audience list", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"aud": []any{"https://other.test", testResource}}), at)
		}, want: alice},
		{name: "expired within leeway", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"exp": testNow.Add(-10 * time.Second).Unix()}), at)
		}, want: alice},
		{name: "nbf within leeway", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"nbf": testNow.Add(10 * time.Second).Unix()}), at)
		}, want: alice},
		{name: "no kid", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.NoKeyID()) }, want: alice},
		{name: "scp list", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"scope": nil, "scp": []any{"jobs:read"}}), at)
		}, want: &Principal{ID: alice.ID, Tenant: "acme", Scopes: []string{"jobs:read"}, Groups: alice.Groups}},

		{name: "expired", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.Expired()) }, reason: "expired"},
		{name: "expired beyond leeway", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"exp": testNow.Add(-31 * time.Second).Unix()}), at)
		}, reason: "expired"},
		{name: "not yet valid", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.NotYetValid()) }, reason: "not yet valid"},
		{name: "issued in the future", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.IssuedInFuture()) }, reason: "issued in the future"},
		{name: "wrong audience", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"aud": "https://other.test/mcp"}), at)
		}, reason: "wrong audience"},
		{name: "audience extended", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"aud": testResource + "/admin"}), at)
		}, reason: "wrong audience"},
		{name: "missing audience", token: func(i *authtest.Issuer) string { return i.Token(claims(map[string]any{"aud": nil}), at) }, reason: "missing aud claim"},
		{name: "wrong issuer", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"iss": "https://evil.test"}), at)
		}, reason: "wrong issuer"},
		{name: "missing exp", token: func(i *authtest.Issuer) string { return i.Token(claims(map[string]any{"exp": nil}), at) }, reason: "missing exp claim"},
		{name: "alg none", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.AlgNone()) }, reason: "signing algorithm not allowed"},
		{name: "HS256 with the public key", token: func(i *authtest.Issuer) string {
			return i.Token(claims(nil), at, authtest.HS256WithPublicKey())
		}, reason: "signing algorithm not allowed"},
		{name: "algorithm not in the allow-list", token: func(i *authtest.Issuer) string {
			return i.Token(claims(nil), at, authtest.Alg("PS256"))
		}, reason: "signing algorithm not allowed"},
		{name: "bad signature", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.BadSignature()) }, reason: "bad signature"},
		{name: "unknown kid", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.UnknownKID()) }, reason: "unknown signing key"},
		{name: "kid of another algorithm", token: func(i *authtest.Issuer) string {
			return i.Token(claims(nil), at, authtest.KeyID("es256-1"))
		}, reason: "no usable signing key"},
		{name: "oversized", token: func(i *authtest.Issuer) string { return i.Token(claims(nil), at, authtest.Oversized(maxTokenBytes)) }, reason: "credential too large"},
		{name: "critical header", token: func(i *authtest.Issuer) string {
			return i.Token(claims(nil), at, authtest.Header("crit", []any{"exp"}))
		}, reason: "unsupported critical header"},
		{name: "missing subject", token: func(i *authtest.Issuer) string { return i.Token(claims(map[string]any{"sub": nil}), at) }, reason: "missing or invalid principal claim"},
		{name: "subject not a string", token: func(i *authtest.Issuer) string { return i.Token(claims(map[string]any{"sub": 7}), at) }, reason: "missing or invalid principal claim"},
		{name: "missing tenant", token: func(i *authtest.Issuer) string { return i.Token(claims(map[string]any{"org": nil}), at) }, reason: "missing or invalid tenant claim"},
		{name: "groups not strings", token: func(i *authtest.Issuer) string {
			return i.Token(claims(map[string]any{"groups": []any{1, 2}}), at)
		}, reason: "groups claim is not a list of strings"},
		{name: "not a JWT", token: func(*authtest.Issuer) string { return "not-a-jwt" }, reason: "malformed token"},
		{name: "three garbage segments", token: func(*authtest.Issuer) string { return "a.b.c" }, reason: "malformed token"},
		{name: "not a b64token", token: func(*authtest.Issuer) string { return "abc def" }, reason: "malformed credential"},
		{name: "empty", token: func(*authtest.Issuer) string { return "" }, reason: "empty credential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token(f.iss)
			resp, got := f.serve(t, bearer(token))
			body, _ := io.ReadAll(resp.Body)

			_, err := f.a.Authenticate(bearer(token))
			if tt.want != nil {
				if resp.StatusCode != http.StatusOK || err != nil {
					t.Fatalf("status %d, error %v; want 200", resp.StatusCode, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("principal mismatch (-want +got):\n%s", diff)
				}
				return
			}
			var ite *InvalidTokenError
			if !errors.As(err, &ite) || !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Authenticate error = %v, want an *InvalidTokenError", err)
			}
			gotResp := []string{http.StatusText(resp.StatusCode), resp.Header.Get("WWW-Authenticate"), ite.Reason}
			wantResp := []string{http.StatusText(http.StatusUnauthorized), challengeInvalid, tt.reason}
			if diff := cmp.Diff(wantResp, gotResp); diff != "" {
				t.Errorf("[status, challenge, reason] mismatch (-want +got):\n%s", diff)
			}
			if got != nil {
				t.Errorf("handler reached with %+v", got)
			}
			if len(token) > 8 {
				for where, text := range map[string]string{"error": err.Error(), "body": string(body), "logs": f.logs.String()} {
					if strings.Contains(text, token) || strings.Contains(text, token[:len(token)/2]) {
						t.Errorf("the token appears in the %s", where)
					}
				}
			}
		})
	}
	t.Logf("token corpus: %d cases", len(tests))
}

func TestMissingAndMalformedCredentials(t *testing.T) {
	f := newFixture(t, nil)
	valid := f.iss.Token(claims(nil), authtest.At(testNow))
	tests := []struct {
		name       string
		req        func() *http.Request
		wantStatus int
		wantHeader string
		wantErr    error
	}{
		{"no header", func() *http.Request { return httptest.NewRequest(http.MethodPost, "/mcp", nil) }, 401, challengeMissing, ErrNoCredentials},
		{"basic scheme", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.SetBasicAuth("alice", "secret")
			return r
		}, 401, challengeMissing, ErrNoCredentials},
		{"token in the query", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/mcp?access_token="+valid, nil)
		}, 400, challengeBad, ErrMalformedRequest},
		{"token in the query and the header", func() *http.Request {
			r := bearer(valid)
			r.URL.RawQuery = "access_token=" + valid
			return r
		}, 400, challengeBad, ErrMalformedRequest},
		{"two Authorization headers", func() *http.Request {
			r := bearer(valid)
			r.Header.Add("Authorization", "Bearer "+valid)
			return r
		}, 400, challengeBad, ErrMalformedRequest},
		{"lower-case scheme", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Authorization", "bearer "+valid)
			return r
		}, 200, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := f.serve(t, tt.req())
			_, err := f.a.Authenticate(tt.req())
			got := []any{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), errors.Is(err, tt.wantErr)}
			if diff := cmp.Diff([]any{tt.wantStatus, tt.wantHeader, true}, got); diff != "" {
				t.Errorf("[status, challenge, error kind] mismatch (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestAPIKeys(t *testing.T) {
	dir := t.TempDir()
	fileKey, fileHash, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	rotatedKey, rotatedHash, _ := NewAPIKey()
	keyFile := filepath.Join(dir, "keys.yaml")
	writeFile(t, keyFile, "keys:\n"+
		"  - {name: deploy-bot, sha256: "+strings.ToUpper(fileHash)+", principal: deployer, scopes: [jobs:read]}\n"+
		"  - {name: deploy-bot-next, sha256: "+rotatedHash+", principal: deployer, scopes: [jobs:read]}\n")

	for _, mode := range []struct {
		name  string
		oauth bool
	}{{"with oauth", true}, {"keys only", false}} {
		oauth := mode.oauth
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) {
				c.APIKeys.File = keyFile
				if !oauth {
					c.OAuth = nil
				}
			})
			deployer := &Principal{ID: "key:deployer", Scopes: []string{"jobs:read"}}
			tests := []struct {
				key  string
				want *Principal
			}{
				{testKey, &Principal{ID: "key:ci", Tenant: "acme", Scopes: []string{"jobs:run"}, Groups: []string{"robots"}}},
				{fileKey, deployer},
				{rotatedKey, deployer},
				{testKey + "x", nil},
				{strings.TrimSuffix(testKey, "v"), nil},
				{"jbk_unknown", nil},
			}
			for _, tt := range tests {
				p, err := f.a.Authenticate(bearer(tt.key))
				if tt.want == nil {
					if !errors.Is(err, ErrInvalidToken) {
						t.Errorf("Authenticate(unknown key) = %v, %v; want ErrInvalidToken", p, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("Authenticate(key %s…) = %v", tt.key[:6], err)
				}
				if diff := cmp.Diff(tt.want, p); diff != "" {
					t.Errorf("principal mismatch (-want +got):\n%s", diff)
				}
			}
			// Without OAuth there is no authorization server to point at.
			resp, _ := f.serve(t, bearer("jbk_unknown"))
			want := challengeInvalid
			if !oauth {
				want = `Bearer error="invalid_token", scope="jobs:read jobs:run"`
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != want {
				t.Errorf("challenge = %q, want %q", got, want)
			}
		})
	}
}

func TestAPIKeyPrincipalsAreCopies(t *testing.T) {
	f := newFixture(t, nil)
	p, err := f.a.Authenticate(bearer(testKey))
	if err != nil {
		t.Fatal(err)
	}
	p.Scopes[0] = "admin"
	p.ID = "key:root"
	again, _ := f.a.Authenticate(bearer(testKey))
	if again.ID != "key:ci" || again.Scopes[0] != "jobs:run" {
		t.Errorf("a caller's change leaked into the next principal: %+v", again)
	}
}

func TestAPIKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"missing file", "", "api_keys.file: reading the key file"},
		{"unknown field", "keys:\n  - {name: a, sha256: " + HashAPIKey("k") + ", secret: x}\n", "field secret not found"},
		{"bad hash", "keys:\n  - {name: a, sha256: abc}\n", "keys[0].sha256: must be the 64 hex digits"},
		{"same key inline and in the file", "keys:\n  - {name: again, sha256: " + HashAPIKey(testKey) + "}\n", `keys "ci" and "again" are the same key`},
		{"same name inline and in the file", "keys:\n  - {name: ci, sha256: " + HashAPIKey("other") + "}\n", `two keys are named "ci"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if tt.content != "" {
				writeFile(t, path, tt.content)
			}
			iss := authtest.NewIssuer(t)
			cfg := testConfig(iss)
			cfg.APIKeys.File = path
			_, err := New(t.Context(), cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewAPIKey(t *testing.T) {
	k1, h1, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, _, _ := NewAPIKey()
	if !strings.HasPrefix(k1, "jbk_") || len(k1) != 4+43 || k1 == k2 {
		t.Errorf("NewAPIKey = %q, %q; want two different jbk_ keys of 256 bits", k1, k2)
	}
	if h1 != HashAPIKey(k1) || len(h1) != 64 {
		t.Errorf("hash %q is not HashAPIKey(key)", h1)
	}
	// The SHA-256 of "test", as sha256sum prints it.
	if got := HashAPIKey("test"); got != "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" {
		t.Errorf("HashAPIKey(test) = %s", got)
	}
}

func TestRequireATJWT(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.OAuth.RequireATJWT = true })
	at := authtest.At(testNow)
	for _, tt := range []struct {
		typ  any
		want bool
	}{
		{"at+jwt", true},
		{"application/at+jwt", true},
		{"AT+JWT", true},
		{"JWT", false},
		{nil, false},
	} {
		_, err := f.a.Authenticate(bearer(f.iss.Token(claims(nil), at, authtest.Header("typ", tt.typ))))
		if got := err == nil; got != tt.want {
			t.Errorf("typ %v: error %v, want accepted %v", tt.typ, err, tt.want)
		}
	}
}

func TestConfiguredClaims(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.OAuth.PrincipalClaim = "oid"
		c.OAuth.TenantClaim = "tid"
		c.OAuth.GroupsClaim = "roles"
		c.OAuth.ScopesClaim = "permissions"
	})
	tok := f.iss.Token(map[string]any{
		"sub": "ignored", "oid": "u-42", "tid": "t-7", "aud": testResource,
		"roles": "deployers", "permissions": []any{"jobs:run", "jobs:run"}, "scope": "ignored",
	}, authtest.At(testNow))
	p, err := f.a.Authenticate(bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	want := &Principal{ID: f.iss.URL() + "|u-42", Tenant: "t-7", Scopes: []string{"jobs:run"}, Groups: []string{"deployers"}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("principal mismatch (-want +got):\n%s", diff)
	}
	if !p.HasScope("jobs:run") || p.HasScope("ignored") || !p.InGroup("deployers") {
		t.Errorf("HasScope/InGroup disagree with %+v", p)
	}
}

// TestUnknownKIDFlood checks that tokens naming made-up key IDs cannot make
// the server hammer the issuer: the JWK Set is fetched at start and at most
// once more per jwks_min_refresh, however many such tokens arrive, while a
// genuinely rotated key is picked up by that one refresh.
func TestUnknownKIDFlood(t *testing.T) {
	f := newFixture(t, nil)
	at := authtest.At(testNow)
	if n := f.iss.JWKSFetches(); n != 1 {
		t.Fatalf("JWK Set fetched %d times at start, want 1", n)
	}
	// The issuer rotates; the first token with the new key ID triggers the
	// one refresh allowed, and is accepted.
	if err := f.iss.Rotate(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.Authenticate(bearer(f.iss.Token(claims(nil), at))); err != nil {
		t.Fatalf("token signed with the rotated key: %v", err)
	}

	const flood = 200
	var wg sync.WaitGroup
	errs := make(chan error, flood)
	for range flood {
		wg.Go(func() {
			_, err := f.a.Authenticate(bearer(f.iss.Token(claims(nil), at, authtest.UnknownKID(), authtest.KeyID("kid-"+randomSuffix()))))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		var ite *InvalidTokenError
		if errors.As(err, &ite) && ite.Reason == "unknown signing key" {
			refused++
		}
	}
	// Known keys keep working during and after the flood.
	if _, err := f.a.Authenticate(bearer(f.iss.Token(claims(nil), at, authtest.Alg("ES256")))); err != nil {
		t.Errorf("valid token after the flood: %v", err)
	}
	got := map[string]int64{"refused": int64(refused), "JWKS fetches": f.iss.JWKSFetches()}
	want := map[string]int64{"refused": flood, "JWKS fetches": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	t.Logf("unknown-kid flood: %d tokens, %d refused, %d JWK Set fetches in all (1 at start, 1 for the rotation)", flood, refused, f.iss.JWKSFetches())
}

func randomSuffix() string {
	k, _, _ := NewAPIKey()
	return k[4:14]
}

// TestJWKSOutage checks that keys already known keep working when the
// issuer's JWK Set is unavailable, and that a server started during an
// outage picks the keys up once the issuer is back.
func TestJWKSOutage(t *testing.T) {
	at := authtest.At(testNow)
	f := newFixture(t, nil)
	f.iss.FailJWKS(http.StatusServiceUnavailable)
	if _, err := f.a.Authenticate(bearer(f.iss.Token(claims(nil), at, authtest.UnknownKID()))); err == nil {
		t.Error("unknown key accepted during the outage")
	}
	if _, err := f.a.Authenticate(bearer(f.iss.Token(claims(nil), at))); err != nil {
		t.Errorf("known key during the outage: %v", err)
	}
	if !strings.Contains(f.logs.String(), "fetching the issuer's signing keys failed") {
		t.Errorf("the failed refresh was not logged:\n%s", f.logs)
	}

	down := authtest.NewIssuer(t)
	down.FailJWKS(http.StatusServiceUnavailable)
	a, err := New(t.Context(), testConfig(down), &Options{Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("New during an outage: %v", err)
	}
	tok := down.Token(claims(nil), at)
	if _, err := a.Authenticate(bearer(tok)); err == nil {
		t.Error("token accepted before any key was known")
	}
	down.FailJWKS(0)
	// The refresh allowed per jwks_min_refresh was spent on the failed
	// attempt above; a fresh authenticator shows the recovery path.
	b, err := New(t.Context(), testConfig(down), &Options{Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(bearer(tok)); err != nil {
		t.Errorf("token after the issuer came back: %v", err)
	}
}

func TestMetadata(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.OAuth.AuthorizationServers = []string{"https://login.test", "https://backup.test"}
	})
	if got := f.a.MetadataURL(); got != testMetadata {
		t.Errorf("MetadataURL = %q, want %q", got, testMetadata)
	}
	wantPaths := []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"}
	if diff := cmp.Diff(wantPaths, f.a.MetadataPaths()); diff != "" {
		t.Errorf("MetadataPaths mismatch (-want +got):\n%s", diff)
	}

	tests := []struct {
		method     string
		wantStatus int
	}{
		{http.MethodGet, 200}, {http.MethodHead, 200}, {http.MethodOptions, 204}, {http.MethodPost, 405},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		f.a.MetadataHandler().ServeHTTP(w, httptest.NewRequest(tt.method, wantPaths[1], nil))
		if w.Code != tt.wantStatus || w.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: status %d, CORS %q; want %d and *", tt.method, w.Code, w.Header().Get("Access-Control-Allow-Origin"), tt.wantStatus)
		}
		if tt.method != http.MethodGet {
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		var got map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"resource":                 testResource,
			"authorization_servers":    []any{"https://login.test", "https://backup.test"},
			"scopes_supported":         []any{"jobs:read", "jobs:run"},
			"bearer_methods_supported": []any{"header"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("metadata mismatch (-want +got):\n%s", diff)
		}
	}

	// The authorization server defaults to the issuer.
	g := newFixture(t, nil)
	w := httptest.NewRecorder()
	g.a.MetadataHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, wantPaths[0], nil))
	var doc struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	json.Unmarshal(w.Body.Bytes(), &doc)
	if diff := cmp.Diff([]string{g.iss.URL()}, doc.AuthorizationServers); diff != "" {
		t.Errorf("default authorization_servers mismatch (-want +got):\n%s", diff)
	}

	// Without OAuth there is nothing to advertise.
	k := newFixture(t, func(c *Config) { c.OAuth = nil })
	w = httptest.NewRecorder()
	k.a.MetadataHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, wantPaths[0], nil))
	if w.Code != http.StatusNotFound || k.a.MetadataPaths() != nil || k.a.MetadataURL() != "" {
		t.Errorf("keys only: status %d, paths %v, URL %q; want 404, none, empty", w.Code, k.a.MetadataPaths(), k.a.MetadataURL())
	}
}

func TestForbidden(t *testing.T) {
	f := newFixture(t, nil)
	w := httptest.NewRecorder()
	f.a.Forbidden(w, []string{"jobs:run", "jobs:admin", "jobs:run"})
	var body map[string]string
	json.Unmarshal(w.Body.Bytes(), &body)
	got := []any{w.Code, w.Header().Get("WWW-Authenticate"), body}
	want := []any{
		http.StatusForbidden,
		`Bearer error="insufficient_scope", scope="jobs:run jobs:admin", resource_metadata="` + testMetadata + `", error_description="this operation needs scope jobs:run jobs:admin"`,
		map[string]string{"error": "insufficient_scope", "error_description": "this operation needs scope jobs:run jobs:admin"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestChallengeQuoting(t *testing.T) {
	got := challenge([]param{{"a", `x"y\z`}, {"b", "line\r\nbreak"}})
	if want := `Bearer a="x\"y\\z", b="linebreak"`; got != want {
		t.Errorf("challenge = %s, want %s", got, want)
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := PrincipalFrom(context.Background()); ok {
		t.Error("PrincipalFrom found a principal in an empty context")
	}
	p := &Principal{ID: "key:x"}
	got, ok := PrincipalFrom(WithPrincipal(t.Context(), p))
	if !ok || got != p {
		t.Errorf("PrincipalFrom = %v, %v", got, ok)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
