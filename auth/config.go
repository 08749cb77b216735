package auth

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// Config is the catalog's top-level `auth:` block: who may use the HTTP
// endpoint. Configure OAuth (JWT access tokens from an authorization server),
// API keys, or both.
//
//	auth:
//	  resource: https://mcp.example.com/mcp
//	  scopes_supported: [jobs:read, jobs:run]
//	  oauth:
//	    issuer: https://login.example.com/
//	    jwks_url: https://login.example.com/.well-known/jwks.json
//	    tenant_claim: org_id
//	    groups_claim: groups
//	  api_keys:
//	    file: /etc/jobbridge/api-keys.yaml
//	    keys:
//	      - name: nightly-ci
//	        sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//	        tenant: acme
//	        scopes: [jobs:run]
type Config struct {
	// Resource is this server's canonical URL, e.g.
	// https://mcp.example.com/mcp: the audience every access token must
	// carry (RFC 8707), and the `resource` of the protected resource
	// metadata (RFC 9728). Required with oauth. https, or http on a
	// loopback host.
	Resource string `yaml:"resource"`
	// OAuth validates JWT access tokens issued by an authorization server.
	OAuth *OAuthConfig `yaml:"oauth"`
	// APIKeys are static keys for small deployments.
	APIKeys *APIKeysConfig `yaml:"api_keys"`
	// ScopesSupported are the scopes this server understands. They are
	// listed in the protected resource metadata and requested in the
	// WWW-Authenticate challenge of a 401.
	ScopesSupported []string `yaml:"scopes_supported"`
}

// OAuthConfig says which JWT access tokens are accepted and how their
// claims map onto a [Principal].
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier; a token's
	// iss must equal it exactly. Required.
	Issuer string `yaml:"issuer"`
	// JWKSURL is where the issuer publishes its signing keys (JWK Set).
	// Required; https, or http on a loopback host.
	JWKSURL string `yaml:"jwks_url"`
	// Algorithms are the signing algorithms accepted (RS256, RS384, RS512,
	// PS256, PS384, PS512, ES256, ES384, ES512, EdDSA). `none` and the HMAC
	// algorithms are never accepted. Default [RS256, ES256].
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed when checking exp, nbf and iat.
	// Default 30s; at most 5m.
	Leeway time.Duration `yaml:"leeway"`
	// PrincipalClaim names the claim identifying the caller. The
	// principal's ID is "<issuer>|<value>". Default "sub".
	PrincipalClaim string `yaml:"principal_claim"`
	// TenantClaim, when set, names the claim holding the caller's tenant;
	// a token without it is refused.
	TenantClaim string `yaml:"tenant_claim"`
	// GroupsClaim, when set, names a claim holding the caller's groups (a
	// list of strings, or one string).
	GroupsClaim string `yaml:"groups_claim"`
	// ScopesClaim names the claim holding the granted scopes: a
	// space-separated string or a list of strings. Default "scope"; with the
	// default, a token without "scope" is also read from "scp".
	ScopesClaim string `yaml:"scopes_claim"`
	// AuthorizationServers are listed in the protected resource metadata,
	// where clients look for where to get a token. Default [issuer].
	AuthorizationServers []string `yaml:"authorization_servers"`
	// JWKSMinRefresh is the least time between two fetches of the JWK Set
	// caused by tokens signed with an unknown key ID, so that a flood of
	// made-up key IDs cannot hammer the issuer. The set is also refreshed
	// hourly in the background. Default 5m; at least 1s.
	JWKSMinRefresh time.Duration `yaml:"jwks_min_refresh"`
	// RequireATJWT refuses tokens whose header lacks typ "at+jwt" (RFC
	// 9068), so that an ID token cannot stand in for an access token. Turn
	// it on when the authorization server sets it.
	RequireATJWT bool `yaml:"require_at_jwt"`
}

// APIKeysConfig lists static API keys, inline, in a file, or both. Keys are
// stored as the hex SHA-256 of the key, never the key itself.
type APIKeysConfig struct {
	// File is a YAML file with the same list under `keys:`. It is read
	// when the server starts.
	File string `yaml:"file"`
	// Keys are listed inline.
	Keys []APIKey `yaml:"keys"`
}

// APIKey is one static key and the principal it stands for.
type APIKey struct {
	// Name identifies the key in logs; unique. [A-Za-z0-9_.-], at most 64.
	Name string `yaml:"name"`
	// SHA256 is the hex SHA-256 of the key (see [HashAPIKey]). Keys must
	// be random (at least 128 bits); [NewAPIKey] makes one.
	SHA256 string `yaml:"sha256"`
	// Principal names the caller; the principal's ID is "key:<principal>".
	// Several keys may share a principal (for rotation). Default: the name.
	Principal string `yaml:"principal"`
	// Tenant is the caller's tenant.
	Tenant string `yaml:"tenant"`
	// Scopes are the scopes the key grants.
	Scopes []string `yaml:"scopes"`
	// Groups are the caller's groups.
	Groups []string `yaml:"groups"`
}

// Defaults applied by SetDefaults, and bounds.
const (
	defaultLeeway         = 30 * time.Second
	maxLeeway             = 5 * time.Minute
	defaultJWKSMinRefresh = 5 * time.Minute
	minJWKSMinRefresh     = time.Second
)

// defaultAlgorithms are the signing algorithms accepted when the
// configuration names none.
var defaultAlgorithms = []string{"RS256", "ES256"}

// asymmetricAlgorithms are the algorithms that may be allowed: those whose
// keys can come from a JWK Set.
var asymmetricAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
}

var (
	keyNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// SetDefaults fills what the operator left out.
func (c *Config) SetDefaults() {
	if c.OAuth == nil {
		return
	}
	o := c.OAuth
	if len(o.Algorithms) == 0 {
		o.Algorithms = slices.Clone(defaultAlgorithms)
	}
	if o.Leeway == 0 {
		o.Leeway = defaultLeeway
	}
	if o.PrincipalClaim == "" {
		o.PrincipalClaim = "sub"
	}
	if o.ScopesClaim == "" {
		o.ScopesClaim = "scope"
	}
	if len(o.AuthorizationServers) == 0 && o.Issuer != "" {
		o.AuthorizationServers = []string{o.Issuer}
	}
	if o.JWKSMinRefresh == 0 {
		o.JWKSMinRefresh = defaultJWKSMinRefresh
	}
}

// Validate reports every problem, joined, each as an [fielderr.Error]
// whose path is relative to the `auth:` block (for example
// "oauth.jwks_url" or "api_keys.keys[1].sha256"). It may be called before or
// after SetDefaults. It does not read the API key file; [New] does.
func (c *Config) Validate() error {
	var errs []error
	add := func(e ...error) { errs = append(errs, e...) }
	if c.OAuth == nil && c.APIKeys == nil {
		add(fielderr.Errorf("", "configure oauth, api_keys or both"))
	}
	switch {
	case c.Resource != "":
		if err := checkURL(c.Resource); err != nil {
			add(fielderr.Errorf("resource", "%v", err))
		}
	case c.OAuth != nil:
		add(fielderr.Errorf("resource", "required with oauth: this server's canonical URL, the audience of its tokens"))
	}
	for i, s := range c.ScopesSupported {
		add(checkScope(fmt.Sprintf("scopes_supported[%d]", i), s)...)
		if s == "offline_access" {
			add(fielderr.Errorf(fmt.Sprintf("scopes_supported[%d]", i), "a protected resource does not advertise offline_access"))
		}
	}
	if c.OAuth != nil {
		add(c.OAuth.validate()...)
	}
	if c.APIKeys != nil {
		if c.APIKeys.File == "" && len(c.APIKeys.Keys) == 0 {
			add(fielderr.Errorf("api_keys", "set file, keys or both"))
		}
		add(validateKeys("api_keys.keys", c.APIKeys.Keys)...)
	}
	return errors.Join(errs...)
}

func (o *OAuthConfig) validate() []error {
	var errs []error
	add := func(e ...error) { errs = append(errs, e...) }
	if o.Issuer == "" {
		add(fielderr.Errorf("oauth.issuer", "required"))
	} else if err := checkURL(o.Issuer); err != nil {
		add(fielderr.Errorf("oauth.issuer", "%v", err))
	}
	if o.JWKSURL == "" {
		add(fielderr.Errorf("oauth.jwks_url", "required"))
	} else if err := checkURL(o.JWKSURL); err != nil {
		add(fielderr.Errorf("oauth.jwks_url", "%v", err))
	}
	for i, alg := range o.Algorithms {
		if !slices.Contains(asymmetricAlgorithms, alg) {
			add(fielderr.Errorf(fmt.Sprintf("oauth.algorithms[%d]", i), "%q is not allowed; use one of %s", alg, strings.Join(asymmetricAlgorithms, ", ")))
		}
	}
	if o.Leeway < 0 || o.Leeway > maxLeeway {
		add(fielderr.Errorf("oauth.leeway", "must be between 0 and %v", maxLeeway))
	}
	if o.JWKSMinRefresh != 0 && o.JWKSMinRefresh < minJWKSMinRefresh {
		add(fielderr.Errorf("oauth.jwks_min_refresh", "must be at least %v", minJWKSMinRefresh))
	}
	for i, s := range o.AuthorizationServers {
		if err := checkURL(s); err != nil {
			add(fielderr.Errorf(fmt.Sprintf("oauth.authorization_servers[%d]", i), "%v", err))
		}
	}
	return errs
}

func validateKeys(path string, keys []APIKey) []error {
	var errs []error
	names := map[string]bool{}
	hashes := map[string]bool{}
	for i, k := range keys {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case !keyNameRE.MatchString(k.Name):
			errs = append(errs, fielderr.Errorf(p+".name", "must be 1 to 64 of A-Z a-z 0-9 _ . -"))
		case names[k.Name]:
			errs = append(errs, fielderr.Errorf(p+".name", "duplicate key name %q", k.Name))
		}
		names[k.Name] = true
		switch h := strings.ToLower(k.SHA256); {
		case !sha256RE.MatchString(k.SHA256):
			errs = append(errs, fielderr.Errorf(p+".sha256", "must be the 64 hex digits of the key's SHA-256"))
		case hashes[h]:
			errs = append(errs, fielderr.Errorf(p+".sha256", "the same key is listed twice"))
		default:
			hashes[h] = true
		}
		if hasControl(k.Principal) || strings.TrimSpace(k.Principal) != k.Principal {
			errs = append(errs, fielderr.Errorf(p+".principal", "must not contain control characters or surrounding spaces"))
		}
		if hasControl(k.Tenant) {
			errs = append(errs, fielderr.Errorf(p+".tenant", "must not contain control characters"))
		}
		for j, s := range k.Scopes {
			errs = append(errs, checkScope(fmt.Sprintf("%s.scopes[%d]", p, j), s)...)
		}
		for j, g := range k.Groups {
			if g == "" || hasControl(g) {
				errs = append(errs, fielderr.Errorf(fmt.Sprintf("%s.groups[%d]", p, j), "must be a non-empty name without control characters"))
			}
		}
	}
	return errs
}

// checkURL checks a URL the server trusts: absolute https, or http on a
// loopback host (tests and the demo), no credentials, no fragment.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a valid URL")
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return errors.New("must be an absolute https:// URL")
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return errors.New("must use https (http only on a loopback host)")
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment")
	case strings.ContainsAny(raw, "\"\\ "):
		return errors.New("must not contain quotes, backslashes or spaces")
	}
	return nil
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// checkScope checks an RFC 6749 scope-token, which may then be quoted in a
// WWW-Authenticate header.
func checkScope(path, s string) []error {
	if s == "" {
		return []error{fielderr.Errorf(path, "empty scope")}
	}
	for _, c := range s {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return []error{fielderr.Errorf(path, "scope %q may only contain printable ASCII other than space, '\"' and '\\'", s)}
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// normalizeHash returns the key hash in the form compared at run time.
func normalizeHash(h string) []byte {
	b, _ := hex.DecodeString(h) // validated
	return b
}
