package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// JWK Set fetching bounds.
const (
	jwksTimeout         = 10 * time.Second
	jwksRefreshInterval = time.Hour
	maxJWKSBytes        = 1 << 20
)

// jwtVerifier validates JWT access tokens.
type jwtVerifier struct {
	cfg    OAuthConfig
	parser *jwt.Parser
	keys   keyfunc.Keyfunc
	// remote holds the keys last fetched; reading it never refreshes.
	remote jwkset.Storage
}

// Header problems found before a key is looked up.
var (
	errCritical       = errors.New("critical header")
	errNotAccessToken = errors.New("not an access token")
	errUnknownKey     = errors.New("unknown key ID")
)

func newJWTVerifier(ctx context.Context, cfg *OAuthConfig, resource string, client *http.Client, now func() time.Time, log *slog.Logger) (*jwtVerifier, error) {
	client = jwksClient(client)
	remote, err := jwkset.NewStorageFromHTTP(cfg.JWKSURL, jwkset.HTTPClientStorageOptions{
		Client:                    client,
		Ctx:                       ctx,
		HTTPTimeout:               jwksTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshInterval:           jwksRefreshInterval,
		RefreshErrorHandler: func(_ context.Context, err error) {
			log.Warn("fetching the issuer's signing keys failed; keeping the keys already known",
				"jwks_url", cfg.JWKSURL, "error", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth configuration: oauth.jwks_url: %w", err)
	}
	storage, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs: map[string]jwkset.Storage{cfg.JWKSURL: remote},
		// Bounds both the wait for the limiter and the refresh itself. A
		// request that would have to wait longer than this for the
		// limiter fails at once instead.
		RateLimitWaitMax:  jwksTimeout,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(cfg.JWKSMinRefresh), 1),
	})
	if err != nil {
		return nil, fmt.Errorf("auth configuration: oauth.jwks_url: %w", err)
	}
	keys, err := keyfunc.New(keyfunc.Options{
		Ctx:     ctx,
		Storage: storage,
		// Keys marked for encryption are not signing keys.
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return nil, fmt.Errorf("auth configuration: oauth: %w", err)
	}
	aud := strings.TrimSuffix(resource, "/")
	return &jwtVerifier{
		cfg:    *cfg,
		keys:   keys,
		remote: remote,
		parser: jwt.NewParser(
			jwt.WithValidMethods(cfg.Algorithms),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(aud, aud+"/"),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithTimeFunc(now),
		),
	}, nil
}

// jwksClient returns a copy of c (default: a 10s timeout, no redirects)
// whose responses are cut at maxJWKSBytes.
func jwksClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	} else {
		out.Timeout = jwksTimeout
		out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	base := out.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = limitedTransport{base: base}
	return &out
}

// limitedTransport cuts response bodies at maxJWKSBytes, so that a huge
// answer ends in a decoding error instead of filling memory.
type limitedTransport struct{ base http.RoundTripper }

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, maxJWKSBytes), Closer: resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}

// keyfunc checks the header for what the parser does not (a critical
// extension, the access token type) and looks the key up, refreshing the
// key set for an unknown key ID within the rate limit. The parser has
// already refused algorithms outside the allow-list, so neither `none` nor
// an HMAC algorithm gets here.
func (v *jwtVerifier) keyfunc(ctx context.Context) jwt.Keyfunc {
	lookup := v.keys.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errCritical
		}
		if v.cfg.RequireATJWT {
			typ, _ := t.Header["typ"].(string)
			if !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
				return nil, errNotAccessToken
			}
		}
		key, err := lookup(t)
		if err != nil {
			// A refresh that was due, or was not allowed yet (the rate
			// limit), both end here when the key ID is still unknown.
			if kid, ok := t.Header["kid"].(string); ok {
				if _, e := v.remote.KeyRead(ctx, kid); errors.Is(e, jwkset.ErrKeyNotFound) {
					return nil, errUnknownKey
				}
			}
		}
		return key, err
	}
}

func (v *jwtVerifier) verify(ctx context.Context, token string) (*Principal, error) {
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(token, claims, v.keyfunc(ctx))
	if err != nil {
		return nil, invalid(v.reason(tok, claims, err))
	}
	return v.principal(claims)
}

// reason turns a parser error into fixed words, never quoting the token.
func (v *jwtVerifier) reason(tok *jwt.Token, claims jwt.MapClaims, err error) string {
	if errors.Is(err, jwt.ErrTokenMalformed) {
		return "malformed token"
	}
	if tok != nil {
		if alg, _ := tok.Header["alg"].(string); !slices.Contains(v.cfg.Algorithms, alg) {
			return "signing algorithm not allowed"
		}
	}
	switch {
	case errors.Is(err, errCritical):
		return "unsupported critical header"
	case errors.Is(err, errNotAccessToken):
		return "not an access token (typ is not at+jwt)"
	case errors.Is(err, errUnknownKey):
		return "unknown signing key"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "no usable signing key"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		for _, c := range []string{"exp", "iss", "aud"} {
			if _, ok := claims[c]; !ok {
				return "missing " + c + " claim"
			}
		}
		return "missing required claim"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "not yet valid"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "issued in the future"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	}
	return "invalid claims"
}

// principal maps the claims of a valid token.
func (v *jwtVerifier) principal(claims jwt.MapClaims) (*Principal, error) {
	id, _ := claims[v.cfg.PrincipalClaim].(string)
	if id == "" || hasControl(id) {
		return nil, invalid("missing or invalid principal claim")
	}
	p := &Principal{ID: v.cfg.Issuer + "|" + id}
	if c := v.cfg.TenantClaim; c != "" {
		t, _ := claims[c].(string)
		if t == "" || hasControl(t) {
			return nil, invalid("missing or invalid tenant claim")
		}
		p.Tenant = t
	}
	if c := v.cfg.GroupsClaim; c != "" {
		if raw, ok := claims[c]; ok {
			groups, ok := stringList(raw)
			if !ok {
				return nil, invalid("groups claim is not a list of strings")
			}
			p.Groups = dedupe(groups)
		}
	}
	raw, ok := claims[v.cfg.ScopesClaim]
	if !ok && v.cfg.ScopesClaim == "scope" {
		raw, ok = claims["scp"]
	}
	if ok {
		var scopes []string
		if s, isString := raw.(string); isString {
			scopes = strings.Fields(s)
		} else if scopes, ok = stringList(raw); !ok {
			return nil, invalid("scope claim is neither a string nor a list of strings")
		}
		p.Scopes = dedupe(scopes)
	}
	return p, nil
}

// stringList reads a claim that is a list of strings or a single string.
func stringList(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}
