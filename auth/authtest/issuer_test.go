package authtest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func TestNewIssuerServerLoopbackOnly(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "10.0.0.1:0", "issuer.test:0", "127.0.0.1"} {
		if i, err := NewIssuerServer(addr); err == nil {
			i.Close()
			t.Errorf("NewIssuerServer(%q) succeeded, want a refusal", addr)
		}
	}
}

func TestJWKS(t *testing.T) {
	i := NewIssuer(t)
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if code := getJSON(t, i.JWKSURL(), &set); code != http.StatusOK {
		t.Fatalf("GET jwks: %d", code)
	}
	var got []string
	for _, k := range set.Keys {
		got = append(got, k["kid"]+" "+k["kty"]+" "+k["alg"]+" "+k["use"]+" "+k["crv"])
		for _, f := range []string{"d", "p", "q"} {
			if _, ok := k[f]; ok {
				t.Errorf("key %s publishes private field %q", k["kid"], f)
			}
		}
	}
	want := []string{"rs256-1 RSA RS256 sig ", "es256-1 EC ES256 sig P-256"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys mismatch (-want +got):\n%s", diff)
	}
	if err := i.Rotate(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rs256-1", "es256-1", "rs256-2", "es256-2"}, i.KeyIDs()); diff != "" {
		t.Errorf("key IDs after rotation mismatch (-want +got):\n%s", diff)
	}
	i.FailJWKS(http.StatusServiceUnavailable)
	if code := getJSON(t, i.JWKSURL(), &set); code != http.StatusServiceUnavailable {
		t.Errorf("GET jwks while failing: %d, want 503", code)
	}
	if n := i.JWKSFetches(); n != 2 {
		t.Errorf("JWKSFetches = %d, want 2", n)
	}
}

// verify checks a token against the published keys with the JWT library
// directly, allowing every algorithm the issuer can sign with.
func verify(t *testing.T, i *Issuer, token string) (jwt.MapClaims, error) {
	t.Helper()
	kf, err := keyfunc.NewDefaultCtx(t.Context(), []string{i.JWKSURL()})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(token, claims, kf.Keyfunc,
		jwt.WithValidMethods([]string{"RS256", "ES256"}), jwt.WithExpirationRequired())
	return claims, err
}

func parts(t *testing.T, token string) (header, claims map[string]any, sig string) {
	t.Helper()
	p := strings.Split(token, ".")
	if len(p) != 3 {
		t.Fatalf("token has %d parts", len(p))
	}
	for n, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(p[n])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	return header, claims, p[2]
}

func TestTokens(t *testing.T) {
	i := NewIssuer(t)
	base := map[string]any{"sub": "alice", "aud": "https://mcp.test/mcp"}
	t0 := time.Unix(1_900_000_000, 0)

	for _, alg := range []string{"RS256", "ES256"} {
		claims, err := verify(t, i, i.Token(base, Alg(alg)))
		if err != nil {
			t.Errorf("%s token does not verify: %v", alg, err)
		}
		if claims["iss"] != i.URL() || claims["sub"] != "alice" {
			t.Errorf("%s claims = %v", alg, claims)
		}
	}

	tests := []struct {
		name  string
		opts  []TokenOption
		check func(header, claims map[string]any, sig string) bool
	}{
		{"defaults", []TokenOption{At(t0)}, func(h, c map[string]any, _ string) bool {
			return h["alg"] == "RS256" && h["kid"] == "rs256-1" && c["iat"] == float64(t0.Unix()) && c["exp"] == float64(t0.Add(time.Hour).Unix()) && c["jti"] != nil
		}},
		{"expired", []TokenOption{At(t0), Expired()}, func(_, c map[string]any, _ string) bool { return c["exp"].(float64) < float64(t0.Unix()) }},
		{"not yet valid", []TokenOption{At(t0), NotYetValid()}, func(_, c map[string]any, _ string) bool { return c["nbf"].(float64) > float64(t0.Unix()) }},
		{"issued in the future", []TokenOption{At(t0), IssuedInFuture()}, func(_, c map[string]any, _ string) bool { return c["iat"].(float64) > float64(t0.Unix()) }},
		{"alg none", []TokenOption{AlgNone()}, func(h, _ map[string]any, sig string) bool { return h["alg"] == "none" && sig == "" }},
		{"HS256 with the public key", []TokenOption{HS256WithPublicKey()}, func(h, _ map[string]any, _ string) bool { return h["alg"] == "HS256" && h["kid"] == "rs256-1" }},
		{"unknown kid", []TokenOption{UnknownKID()}, func(h, _ map[string]any, _ string) bool { return !slices.Contains(i.KeyIDs(), h["kid"].(string)) }},
		{"PS256 with the RSA key", []TokenOption{Alg("PS256")}, func(h, _ map[string]any, _ string) bool { return h["alg"] == "PS256" && h["kid"] == "rs256-1" }},
		{"no kid", []TokenOption{NoKeyID()}, func(h, _ map[string]any, _ string) bool { _, ok := h["kid"]; return !ok }},
		{"typ header", []TokenOption{Header("typ", "at+jwt")}, func(h, _ map[string]any, _ string) bool { return h["typ"] == "at+jwt" }},
	}
	for _, tt := range tests {
		h, c, sig := parts(t, i.Token(base, tt.opts...))
		if !tt.check(h, c, sig) {
			t.Errorf("%s: header %v, claims %v", tt.name, h, c)
		}
	}

	if _, err := verify(t, i, i.Token(base, BadSignature())); err == nil {
		t.Error("a token with a bad signature verifies")
	}
	if _, err := verify(t, i, i.Token(base, UnknownKID())); err == nil {
		t.Error("a token signed with an unpublished key verifies")
	}
	if tok := i.Token(base, Oversized(9000)); len(tok) <= 9000 {
		t.Errorf("Oversized(9000) token has %d bytes", len(tok))
	}
	_, c, _ := parts(t, i.Token(map[string]any{"exp": nil, "iss": "https://other.test"}))
	if _, ok := c["exp"]; ok || c["iss"] != "https://other.test" {
		t.Errorf("claims override: %v", c)
	}
	if _, err := i.Sign(base, Alg("ES384")); err == nil {
		t.Error("Sign with ES384 (no such key) succeeded")
	}
}

func TestTokenEndpointAndMetadata(t *testing.T) {
	i := NewIssuer(t)
	var meta map[string]any
	if code := getJSON(t, i.URL()+"/.well-known/oauth-authorization-server", &meta); code != http.StatusOK {
		t.Fatalf("metadata: %d", code)
	}
	if meta["issuer"] != i.URL() || meta["jwks_uri"] != i.JWKSURL() || meta["token_endpoint"] != i.URL()+"/token" {
		t.Errorf("metadata = %v", meta)
	}

	resp, err := http.PostForm(i.URL()+"/token", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"demo"},
		"scope": {"jobs:run"}, "resource": {"http://127.0.0.1:8080/mcp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	if resp.StatusCode != http.StatusOK || tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 {
		t.Fatalf("token endpoint: %d %+v", resp.StatusCode, tok)
	}
	claims, err := verify(t, i, tok.AccessToken)
	if err != nil {
		t.Fatalf("issued token does not verify: %v", err)
	}
	got := map[string]any{"sub": claims["sub"], "aud": claims["aud"], "scope": claims["scope"]}
	want := map[string]any{"sub": "demo", "aud": "http://127.0.0.1:8080/mcp", "scope": "jobs:run"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims mismatch (-want +got):\n%s", diff)
	}

	for _, form := range []url.Values{
		{"grant_type": {"password"}, "client_id": {"demo"}},
		{"grant_type": {"client_credentials"}},
	} {
		resp, err := http.PostForm(i.URL()+"/token", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("token request %v: %d, want 400", form, resp.StatusCode)
		}
	}
}
