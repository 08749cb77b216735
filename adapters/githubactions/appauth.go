package githubactions

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v93/github"
	"golang.org/x/sync/singleflight"

	"github.com/jobbridge/jobbridge/secrets"
)

// GitHub App authentication timing.
const (
	// jwtBackdate is how far into the past an app JWT's iat is set, for
	// clock drift (GitHub's recommendation).
	jwtBackdate = 60 * time.Second
	// jwtLifetime is how long an app JWT is valid; GitHub allows at most
	// ten minutes.
	jwtLifetime = 9 * time.Minute
	// tokenRefreshMargin is how long before its expires_at an installation
	// token is replaced.
	tokenRefreshMargin = 5 * time.Minute
)

// loadAppKey reads an RSA private key in PEM (PKCS#1 "RSA PRIVATE KEY" or
// PKCS#8 "PRIVATE KEY"). Errors name the file, never its contents.
func loadAppKey(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the private key file: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("private key file %s: no PEM block", path)
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("private key file %s: not a valid PKCS#1 RSA private key", path)
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("private key file %s: not a valid PKCS#8 private key", path)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private key file %s: a %T, not an RSA private key", path, k)
		}
		return rk, nil
	}
	return nil, fmt.Errorf("private key file %s: PEM block %q is not an RSA private key (want \"RSA PRIVATE KEY\" or \"PRIVATE KEY\")", path, block.Type)
}

// appTokens mints app JWTs and exchanges them for installation tokens,
// keeping the current token until tokenRefreshMargin before it expires.
// Concurrent callers that find no usable token share one exchange.
type appTokens struct {
	appID          int64
	installationID int64
	key            *rsa.PrivateKey
	now            func() time.Time
	red            *secrets.Redactor
	// exchange is a go-github client whose transport signs every request
	// with a fresh app JWT.
	exchange *github.Client

	flight singleflight.Group

	mu        sync.Mutex
	token     string
	refreshAt time.Time
}

// newAppTokens returns the token source for an app installation; transport
// carries the exchange requests (without credentials) and baseURL is the API
// base ("" for GitHub.com).
func newAppTokens(cfg AppConfig, key *rsa.PrivateKey, transport http.RoundTripper, baseURL string, timeout time.Duration, now func() time.Time, red *secrets.Redactor) (*appTokens, error) {
	t := &appTokens{appID: cfg.AppID, installationID: cfg.InstallationID, key: key, now: now, red: red}
	opts := []github.ClientOptionsFunc{
		github.WithHTTPClient(&http.Client{Transport: &jwtAuth{base: transport, tokens: t}, Timeout: timeout}),
		github.WithDisableRateLimitCheck(),
		github.WithUserAgent("jobbridge-github-actions"),
	}
	if baseURL != "" {
		opts = append(opts, github.WithURLs(&baseURL, &baseURL))
	}
	gh, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the GitHub App client: %w", err)
	}
	t.exchange = gh
	return t, nil
}

// jwt returns a new app JWT: RS256, iss the app ID, iat a minute ago, exp in
// nine minutes.
func (t *appTokens) jwt() (string, error) {
	now := t.now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(t.appID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
	})
	s, err := tok.SignedString(t.key)
	if err != nil {
		return "", errors.New("signing the app JWT failed")
	}
	t.red.AddFrom("github:app-jwt", s)
	return s, nil
}

// cached returns the current token while it is usable.
func (t *appTokens) cached() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && t.now().Before(t.refreshAt) {
		return t.token, true
	}
	return "", false
}

// get returns a usable installation token, exchanging a new one when the
// cached one is missing or due for renewal. A caller whose ctx ends stops
// waiting; the exchange itself goes on for the others (bounded by the
// client's timeout).
func (t *appTokens) get(ctx context.Context) (string, error) {
	if tok, ok := t.cached(); ok {
		return tok, nil
	}
	ch := t.flight.DoChan("token", func() (any, error) {
		// A caller that saw the old token may arrive just after the
		// previous exchange ended: check again before exchanging.
		if tok, ok := t.cached(); ok {
			return tok, nil
		}
		return t.refresh(context.WithoutCancel(ctx))
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", &authError{msg: "waiting for an installation token: " + ctx.Err().Error(), causes: []error{ctx.Err(), errNotSent}}
	}
}

// refresh exchanges an app JWT for an installation token and caches it.
func (t *appTokens) refresh(ctx context.Context) (string, error) {
	// An empty options object, not null: GitHub documents a JSON object body.
	it, _, err := t.exchange.Apps.CreateInstallationToken(ctx, t.installationID, &github.InstallationTokenOptions{})
	if err != nil {
		causes := []error{errNotSent}
		for _, c := range []error{ErrRateLimited, context.Canceled, context.DeadlineExceeded} {
			if errors.Is(err, c) {
				causes = append(causes, c)
			}
		}
		return "", &authError{
			msg:    fmt.Sprintf("getting an installation token for app %d, installation %d: %s", t.appID, t.installationID, t.red.Redact(err.Error())),
			causes: causes,
		}
	}
	if it.GetToken() == "" || it.ExpiresAt == nil {
		return "", &authError{msg: fmt.Sprintf("getting an installation token for app %d, installation %d: the answer has no token or expires_at", t.appID, t.installationID), causes: []error{errNotSent}}
	}
	tok := it.GetToken()
	t.red.AddFrom("github:installation-token", tok)
	now := t.now()
	// Renew tokenRefreshMargin before expiry, or half-way through a
	// shorter life, so that a short-lived token is not renewed on every
	// request.
	exp := it.ExpiresAt.Time
	margin := min(tokenRefreshMargin, max(exp.Sub(now), 0)/2)

	t.mu.Lock()
	defer t.mu.Unlock()
	t.token, t.refreshAt = tok, exp.Add(-margin)
	return tok, nil
}

// invalidate drops tok if it is still the cached token (GitHub answered 401
// to it: revoked, or the clocks disagree), so the next request exchanges a
// new one.
func (t *appTokens) invalidate(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == tok {
		t.token = ""
	}
}

// authError is a failure to obtain credentials: the request was not sent.
// Its text is redacted; it unwraps only to sentinel errors, never to an
// error whose text might carry a credential.
type authError struct {
	msg    string
	causes []error
}

func (e *authError) Error() string   { return e.msg }
func (e *authError) Unwrap() []error { return e.causes }

// jwtAuth signs each request with a fresh app JWT (the exchange client).
type jwtAuth struct {
	base   http.RoundTripper
	tokens *appTokens
}

// RoundTrip implements http.RoundTripper.
func (j *jwtAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	s, err := j.tokens.jwt()
	if err != nil {
		return nil, &authError{msg: err.Error(), causes: []error{errNotSent}}
	}
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", "Bearer "+s)
	return j.base.RoundTrip(out)
}

// installationAuth sets the installation token on every API request. It
// sits above the ETag cache, whose entries are keyed by the credential, so a
// rotated token re-fetches instead of reusing another token's answers.
type installationAuth struct {
	base   http.RoundTripper
	tokens *appTokens
}

// RoundTrip implements http.RoundTripper.
func (i *installationAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := i.tokens.get(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", "token "+tok)
	resp, err := i.base.RoundTrip(out)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		i.tokens.invalidate(tok)
	}
	return resp, err
}
