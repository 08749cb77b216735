package githubfake

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v93/github"
)

const (
	appID          = 4242
	installationID = 777
)

// appKeys are generated once: RSA key generation is slow under -race.
var appKeys = struct{ good, other *rsa.PrivateKey }{mustKey(), mustKey()}

func mustKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

func signJWT(t *testing.T, method jwt.SigningMethod, key any, claims jwt.RegisteredClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bearerClient is a go-github client that sends a fixed bearer credential.
func bearerClient(t *testing.T, base, credential string) *github.Client {
	t.Helper()
	gh, err := github.NewClient(github.WithURLs(&base, &base), github.WithAuthToken(credential), github.WithDisableRateLimitCheck())
	if err != nil {
		t.Fatal(err)
	}
	return gh
}

func appFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t, func(o *Options) {
		o.Tokens = nil
		o.AppPublicKey = &appKeys.good.PublicKey
		o.AppID, o.InstallationID = appID, installationID
		o.AppTokenLifetime = 10 * time.Minute
	})
	return f, f.gh.BaseURL()
}

func TestAppTokenExchange(t *testing.T) {
	f, base := appFixture(t)
	valid := jwt.RegisteredClaims{
		Issuer:    "4242",
		IssuedAt:  jwt.NewNumericDate(t0.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(t0.Add(9 * time.Minute)),
	}
	edit := func(e func(*jwt.RegisteredClaims)) jwt.RegisteredClaims { c := valid; e(&c); return c }
	for _, c := range []struct {
		name         string
		jwt          string
		installation int64
		want         int
	}{
		{"valid", signJWT(t, jwt.SigningMethodRS256, appKeys.good, valid), installationID, http.StatusCreated},
		{"another installation", signJWT(t, jwt.SigningMethodRS256, appKeys.good, valid), 778, http.StatusNotFound},
		{"another key", signJWT(t, jwt.SigningMethodRS256, appKeys.other, valid), installationID, http.StatusUnauthorized},
		{"HS256", signJWT(t, jwt.SigningMethodHS256, []byte("secret"), valid), installationID, http.StatusUnauthorized},
		{"another app", signJWT(t, jwt.SigningMethodRS256, appKeys.good, edit(func(c *jwt.RegisteredClaims) { c.Issuer = "1" })), installationID, http.StatusUnauthorized},
		{"expired", signJWT(t, jwt.SigningMethodRS256, appKeys.good, edit(func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(t0.Add(-time.Second)) })), installationID, http.StatusUnauthorized},
		{"exp too far", signJWT(t, jwt.SigningMethodRS256, appKeys.good, edit(func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(t0.Add(11 * time.Minute)) })), installationID, http.StatusUnauthorized},
		{"no iat", signJWT(t, jwt.SigningMethodRS256, appKeys.good, edit(func(c *jwt.RegisteredClaims) { c.IssuedAt = nil })), installationID, http.StatusUnauthorized},
		{"iat in the future", signJWT(t, jwt.SigningMethodRS256, appKeys.good, edit(func(c *jwt.RegisteredClaims) { c.IssuedAt = jwt.NewNumericDate(t0.Add(time.Minute)) })), installationID, http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.srv.TokenExchanges()
			it, resp, err := bearerClient(t, base, c.jwt).Apps.CreateInstallationToken(t.Context(), c.installation, &github.InstallationTokenOptions{})
			if resp == nil || resp.StatusCode != c.want {
				t.Fatalf("status %v (%v), want %d", resp, err, c.want)
			}
			if c.want != http.StatusCreated {
				if got := f.srv.TokenExchanges(); got != before {
					t.Errorf("TokenExchanges = %d after a refused exchange, want %d", got, before)
				}
				return
			}
			if it.GetToken() == "" || !it.GetExpiresAt().Time.Equal(t0.Add(10*time.Minute)) {
				t.Errorf("token %q expiring %v, want one expiring at %v", it.GetToken(), it.GetExpiresAt(), t0.Add(10*time.Minute))
			}
			if got := f.srv.TokenExchanges(); got != before+1 {
				t.Errorf("TokenExchanges = %d, want %d", got, before+1)
			}
		})
	}
}

// TestAppTokensAuthorizeUntilExpiry checks that API requests need an issued
// token, which works until it expires.
func TestAppTokensAuthorizeUntilExpiry(t *testing.T) {
	f, base := appFixture(t)
	status := func(credential string) int {
		t.Helper()
		_, resp, err := bearerClient(t, base, credential).Actions.ListWorkflowRunsByFileName(t.Context(), "o", "r", "ci.yml", nil)
		if resp == nil {
			t.Fatalf("no answer: %v", err)
		}
		return resp.StatusCode
	}
	if got := status("ghs_made_up"); got != http.StatusUnauthorized {
		t.Errorf("a made-up token: %d, want 401", got)
	}
	jwtStr := signJWT(t, jwt.SigningMethodRS256, appKeys.good, jwt.RegisteredClaims{
		Issuer: "4242", IssuedAt: jwt.NewNumericDate(t0), ExpiresAt: jwt.NewNumericDate(t0.Add(5 * time.Minute)),
	})
	if got := status(jwtStr); got != http.StatusUnauthorized {
		t.Errorf("the app JWT on the API: %d, want 401", got)
	}
	it, _, err := bearerClient(t, base, jwtStr).Apps.CreateInstallationToken(t.Context(), installationID, &github.InstallationTokenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := status(it.GetToken()); got != http.StatusOK {
		t.Errorf("an issued token: %d, want 200", got)
	}
	f.clock.Advance(10*time.Minute - time.Second)
	if got := status(it.GetToken()); got != http.StatusOK {
		t.Errorf("an issued token a second before expiry: %d, want 200", got)
	}
	f.clock.Advance(time.Second)
	_, _, err = bearerClient(t, base, it.GetToken()).Actions.ListWorkflowRunsByFileName(t.Context(), "o", "r", "ci.yml", nil)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != http.StatusUnauthorized || er.Message != "Bad credentials" {
		t.Errorf("an expired token: %v, want 401 Bad credentials", err)
	}
}
