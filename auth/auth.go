// Package auth authenticates HTTP requests to the MCP endpoint. It is an
// OAuth 2.1 resource server in the sense of the MCP authorization spec: it
// validates JWT access tokens against the issuer's published keys (issuer,
// audience = this server's canonical URL per RFC 8707, expiry, allowed
// algorithms only), serves RFC 9728 protected resource metadata, and answers
// 401 and 403 with the WWW-Authenticate challenges clients follow. For small
// deployments it also accepts static API keys, stored as SHA-256 hashes.
//
// # Credentials
//
// Credentials travel only as `Authorization: Bearer <credential>`; a request
// with an access_token query parameter or with two Authorization headers is
// malformed (400). A credential is first hashed and compared, in constant
// time, with every configured API key; one that matches is that key. Any
// other credential is validated as a JWT access token when OAuth is
// configured, and refused otherwise. API keys and JWTs therefore need no
// marker to be told apart (a JWT's hash will not equal a key's); keys made by
// [NewAPIKey] start with "jbk_" so that people and secret scanners recognise
// them.
//
// # Principals
//
// A JWT's caller is "<issuer>|<principal claim>" (a sub is only unique within
// its issuer); an API key's is "key:<principal>". Tenant, groups and scopes
// come from configurable claims, or from the key's entry. Tokens are never
// passed on to backends, and neither tokens nor claims appear in errors or
// logs.
//
// # Signing keys
//
// Keys come only from the configured JWK Set URL (never from token headers);
// they are fetched at start, refreshed hourly, and fetched again when a token
// names an unknown key ID, at most once per jwks_min_refresh, so that a flood
// of made-up key IDs cannot hammer the issuer. A failed refresh keeps the
// keys already known.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Principal is an authenticated caller.
type Principal struct {
	// ID identifies the caller: "<issuer>|<sub>" for a JWT, "key:<name>"
	// for an API key. Tasks are bound to it.
	ID string
	// Tenant is the caller's tenant, when configured.
	Tenant string
	// Scopes are the scopes granted.
	Scopes []string
	// Groups are the caller's groups, when configured.
	Groups []string
}

// HasScope reports whether the principal was granted scope s.
func (p *Principal) HasScope(s string) bool { return slices.Contains(p.Scopes, s) }

// InGroup reports whether the principal is in group g.
func (p *Principal) InGroup(g string) bool { return slices.Contains(p.Groups, g) }

func (p *Principal) clone() *Principal {
	c := *p
	c.Scopes = slices.Clone(p.Scopes)
	c.Groups = slices.Clone(p.Groups)
	return &c
}

// Errors returned by [Authenticator.Authenticate]. Their text never contains
// the credential or its claims.
var (
	// ErrNoCredentials: the request carries no bearer credential (401
	// without an error code).
	ErrNoCredentials = errors.New("no bearer credentials")
	// ErrInvalidToken: the credential is not valid (401 invalid_token). The
	// error is an *InvalidTokenError saying why.
	ErrInvalidToken = errors.New("invalid access token")
	// ErrMalformedRequest: the request presents credentials in a way this
	// server does not accept (400 invalid_request).
	ErrMalformedRequest = errors.New("malformed authorization")
)

// InvalidTokenError says why a credential was refused, in fixed words that
// are safe to log and to use as a metric label ("expired", "wrong
// audience", ...). It wraps [ErrInvalidToken].
type InvalidTokenError struct {
	Reason string
}

func (e *InvalidTokenError) Error() string { return "invalid access token: " + e.Reason }
func (e *InvalidTokenError) Unwrap() error { return ErrInvalidToken }

func invalid(reason string) error { return &InvalidTokenError{Reason: reason} }

// maxTokenBytes bounds a bearer credential.
const maxTokenBytes = 8 << 10

// Options are an Authenticator's dependencies. The zero value is ready to
// use.
type Options struct {
	// HTTPClient fetches the JWK Set. Its responses are read up to 1 MiB.
	// Default: a client with a 10s timeout that follows no redirects.
	HTTPClient *http.Client
	// Logger receives refused requests (at debug level, with the reason)
	// and failed key refreshes (warnings). Default: none.
	Logger *slog.Logger
	// Now is the clock for exp, nbf and iat. Default time.Now.
	Now func() time.Time
}

// Authenticator authenticates requests. It is safe for concurrent use.
type Authenticator struct {
	resource    string
	metadataURL string // "" without OAuth: no metadata to point at
	metadata    []byte
	scopes      []string
	keys        []apiKey
	jwt         *jwtVerifier // nil without OAuth
	log         *slog.Logger
}

// New builds an Authenticator: it applies defaults to a copy of cfg,
// validates it, reads the API key file and, with OAuth, fetches the issuer's
// JWK Set (a failed first fetch is logged, not fatal: keys are fetched again
// when a token needs them). ctx bounds the background key refresh: cancel it
// when the server stops.
func New(ctx context.Context, cfg Config, opts *Options) (*Authenticator, error) {
	if opts == nil {
		opts = &Options{}
	}
	if cfg.OAuth != nil {
		o := *cfg.OAuth
		cfg.OAuth = &o
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("auth configuration: %w", err)
	}
	a := &Authenticator{
		resource: cfg.Resource,
		scopes:   slices.Clone(cfg.ScopesSupported),
		log:      opts.Logger,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if cfg.APIKeys != nil {
		keys, err := loadKeys(cfg.APIKeys)
		if err != nil {
			return nil, fmt.Errorf("auth configuration: %w", err)
		}
		a.keys = keys
	}
	if cfg.OAuth != nil {
		now := opts.Now
		if now == nil {
			now = time.Now
		}
		v, err := newJWTVerifier(ctx, cfg.OAuth, cfg.Resource, opts.HTTPClient, now, a.log)
		if err != nil {
			return nil, err
		}
		a.jwt = v
		u, _ := url.Parse(cfg.Resource) // validated
		a.metadataURL = u.Scheme + "://" + u.Host + wellKnownPath
		a.metadata = protectedResourceMetadata(cfg)
	}
	return a, nil
}

// Authenticate returns the caller of r, or an error wrapping
// [ErrNoCredentials], [ErrInvalidToken] or [ErrMalformedRequest].
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	if r.URL.Query().Has("access_token") {
		return nil, fmt.Errorf("%w: access token in the query string; send it in the Authorization header", ErrMalformedRequest)
	}
	vals := r.Header.Values("Authorization")
	switch len(vals) {
	case 0:
		return nil, ErrNoCredentials
	case 1:
	default:
		return nil, fmt.Errorf("%w: more than one Authorization header", ErrMalformedRequest)
	}
	scheme, credential, _ := strings.Cut(vals[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, fmt.Errorf("%w: not a Bearer credential", ErrNoCredentials)
	}
	return a.authenticate(r.Context(), strings.TrimLeft(credential, " "))
}

func (a *Authenticator) authenticate(ctx context.Context, credential string) (*Principal, error) {
	switch {
	case credential == "":
		return nil, invalid("empty credential")
	case len(credential) > maxTokenBytes:
		return nil, invalid("credential too large")
	case !b64token(credential):
		return nil, invalid("malformed credential")
	}
	if k, ok := matchKey(a.keys, credential); ok {
		return k.principal.clone(), nil
	}
	if a.jwt == nil {
		return nil, invalid("unknown API key")
	}
	return a.jwt.verify(ctx, credential)
}

// b64token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func b64token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			return false
		}
	}
	return true
}

type principalKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal [Authenticator.Middleware] (or
// [WithPrincipal]) put in ctx.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
