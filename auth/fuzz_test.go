package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/auth/authtest"
)

// FuzzAuthenticate feeds arbitrary Authorization header values to the
// authenticator: it must never panic, must refuse with one of its three
// errors, and must not quote the credential in the error.
func FuzzAuthenticate(f *testing.F) {
	iss := authtest.NewIssuer(f)
	cfg := testConfig(iss)
	a, err := New(f.Context(), cfg, &Options{Now: func() time.Time { return testNow }})
	if err != nil {
		f.Fatal(err)
	}
	at := authtest.At(testNow)
	seeds := []string{
		"Bearer " + iss.Token(claims(nil), at),
		"Bearer " + iss.Token(claims(nil), at, authtest.Alg("ES256")),
		"Bearer " + iss.Token(claims(nil), at, authtest.AlgNone()),
		"Bearer " + iss.Token(claims(nil), at, authtest.HS256WithPublicKey()),
		"Bearer " + iss.Token(claims(nil), at, authtest.BadSignature()),
		"Bearer " + iss.Token(claims(nil), at, authtest.Expired()),
		"Bearer " + iss.Token(claims(map[string]any{"aud": []any{1, nil, map[string]any{}}}), at),
		"Bearer " + iss.Token(claims(map[string]any{"exp": "soon", "nbf": true, "iat": []any{}}), at),
		"Bearer " + iss.Token(claims(map[string]any{"scope": map[string]any{"a": 1}}), at),
		"Bearer " + iss.Token(claims(nil), at, authtest.Header("kid", 42)),
		"Bearer " + iss.Token(claims(nil), at, authtest.Header("alg", nil)),
		"Bearer " + testKey,
		"Bearer eyJhbGciOiJSUzI1NiJ9.e30.",
		"Bearer eyJ9.eyJ9.eyJ9",
		"Bearer ....",
		"Bearer ===",
		"Bearer",
		"bearer  x",
		"Basic dXNlcjpwYXNz",
		"",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header["Authorization"] = []string{header}
		p, err := a.Authenticate(r)
		if err == nil {
			if p == nil || p.ID == "" {
				t.Fatalf("accepted %q without a principal", header)
			}
			return
		}
		if !errors.Is(err, ErrInvalidToken) && !errors.Is(err, ErrNoCredentials) && !errors.Is(err, ErrMalformedRequest) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if _, cred, ok := strings.Cut(header, " "); ok && len(cred) >= 16 && strings.Contains(err.Error(), cred) {
			t.Fatalf("error %q quotes the credential", err)
		}
	})
}
