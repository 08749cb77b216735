package githubfake

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultAppTokenLifetime is how long an installation token lives when
// [Options.AppTokenLifetime] is zero: an hour, as on GitHub.
const DefaultAppTokenLifetime = time.Hour

// maxJWTLifetime is how far into the future GitHub accepts an app JWT's exp.
const maxJWTLifetime = 10 * time.Minute

// appTokensPath returns the installation ID of a POST
// /app/installations/{id}/access_tokens path.
func appTokensPath(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 4 && parts[0] == "app" && parts[1] == "installations" && parts[3] == "access_tokens" {
		return parts[2], true
	}
	return "", false
}

// exchangeToken serves POST /app/installations/{id}/access_tokens: the
// bearer JWT must be RS256-signed by [Options.AppPublicKey], with iss the app
// ID, iat not in the future and exp at most ten minutes ahead. It runs with
// s.mu held.
func (s *Server) exchangeToken(r *http.Request, installation string) response {
	if r.Method != http.MethodPost {
		return notFound()
	}
	raw := bearer(r.Header.Get("Authorization"))
	if raw == "" {
		return errorResponse(http.StatusUnauthorized, "A JSON web token could not be decoded")
	}
	now := s.now()
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.appKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithIssuedAt(),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(strconv.FormatInt(s.appID, 10)),
	)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return errorResponse(http.StatusUnauthorized, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errorResponse(http.StatusUnauthorized, "'Issuer' claim ('iss') must be an Integer")
	case err != nil:
		return errorResponse(http.StatusUnauthorized, "A JSON web token could not be decoded")
	case claims.IssuedAt == nil:
		return errorResponse(http.StatusUnauthorized, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued")
	case claims.ExpiresAt.Time.After(now.Add(maxJWTLifetime)):
		return errorResponse(http.StatusUnauthorized, "'Expiration time' claim ('exp') is too far in the future")
	}
	if installation != strconv.FormatInt(s.installationID, 10) {
		return notFound()
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b) // never fails
	token := "ghs_" + hex.EncodeToString(b)
	for t, exp := range s.issued {
		if !now.Before(exp) {
			delete(s.issued, t)
		}
	}
	expires := now.Add(s.appTokenLifetime).Truncate(time.Second)
	s.issued[token] = expires
	s.exchanges++
	return response{status: http.StatusCreated, body: installationToken{
		Token:               token,
		ExpiresAt:           expires.UTC().Format(time.RFC3339),
		Permissions:         map[string]string{"actions": "write", "deployments": "write", "metadata": "read"},
		RepositorySelection: "all",
	}}
}

// installationToken is the answer to a token exchange.
type installationToken struct {
	Token               string            `json:"token"`
	ExpiresAt           string            `json:"expires_at"`
	Permissions         map[string]string `json:"permissions"`
	RepositorySelection string            `json:"repository_selection"`
}

// authorized reports whether token may call the API: one of
// [Options.Tokens], or an unexpired installation token the server issued.
// With neither Tokens nor an app configured, every request is.
func (s *Server) authorized(token string) bool {
	if len(s.tokens) == 0 && s.appKey == nil {
		return true
	}
	if s.tokens[token] {
		return true
	}
	exp, ok := s.issued[token]
	return ok && s.now().Before(exp)
}

// TokenExchanges returns how many installation tokens the server issued.
func (s *Server) TokenExchanges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exchanges
}
