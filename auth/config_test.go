package auth

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// fieldPaths lists the paths of the FieldErrors joined in err.
func fieldPaths(t *testing.T, err error) []string {
	t.Helper()
	var paths []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *fielderr.Error
		if !errors.As(err, &fe) {
			t.Errorf("error %q is not a *fielderr.Error", err)
			return
		}
		paths = append(paths, fe.Path)
	}
	if err != nil {
		walk(err)
	}
	return paths
}

func validConfig() Config {
	return Config{
		Resource:        "https://mcp.test/mcp",
		ScopesSupported: []string{"jobs:read", "jobs:run"},
		OAuth: &OAuthConfig{
			Issuer:  "https://login.test/",
			JWKSURL: "https://login.test/keys",
		},
		APIKeys: &APIKeysConfig{Keys: []APIKey{
			{Name: "ci", SHA256: HashAPIKey("k1"), Scopes: []string{"jobs:run"}},
			{Name: "ops.bot", SHA256: HashAPIKey("k2"), Principal: "ops", Tenant: "acme"},
		}},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"valid", func(*Config) {}, nil},
		{"oauth only", func(c *Config) { c.APIKeys = nil }, nil},
		{"keys only, no resource", func(c *Config) { c.OAuth = nil; c.Resource = "" }, nil},
		{"keys from a file", func(c *Config) { c.APIKeys = &APIKeysConfig{File: "keys.yaml"} }, nil},
		{"loopback http", func(c *Config) {
			c.Resource = "http://127.0.0.1:8080/mcp"
			c.OAuth.Issuer, c.OAuth.JWKSURL = "http://localhost:9000", "http://[::1]:9000/jwks.json"
		}, nil},
		{"nothing configured", func(c *Config) { c.OAuth, c.APIKeys = nil, nil }, []string{""}},
		{"oauth without resource", func(c *Config) { c.Resource = "" }, []string{"resource"}},
		{"resource over http", func(c *Config) { c.Resource = "http://mcp.test/mcp" }, []string{"resource"}},
		{"resource with fragment", func(c *Config) { c.Resource = "https://mcp.test/mcp#x" }, []string{"resource"}},
		{"resource relative", func(c *Config) { c.Resource = "/mcp" }, []string{"resource"}},
		{"resource with quote", func(c *Config) { c.Resource = `https://mcp.test/"mcp` }, []string{"resource"}},
		{"missing issuer and keys URL", func(c *Config) { c.OAuth.Issuer, c.OAuth.JWKSURL = "", "" }, []string{"oauth.issuer", "oauth.jwks_url"}},
		{"keys over http", func(c *Config) { c.OAuth.JWKSURL = "http://login.test/keys" }, []string{"oauth.jwks_url"}},
		{"issuer with credentials", func(c *Config) { c.OAuth.Issuer = "https://u:p@login.test/" }, []string{"oauth.issuer"}},
		{"forbidden algorithms", func(c *Config) { c.OAuth.Algorithms = []string{"RS256", "none", "HS256", "rs256"} }, []string{"oauth.algorithms[1]", "oauth.algorithms[2]", "oauth.algorithms[3]"}},
		{"negative leeway", func(c *Config) { c.OAuth.Leeway = -time.Second }, []string{"oauth.leeway"}},
		{"huge leeway", func(c *Config) { c.OAuth.Leeway = time.Hour }, []string{"oauth.leeway"}},
		{"refresh too often", func(c *Config) { c.OAuth.JWKSMinRefresh = time.Millisecond }, []string{"oauth.jwks_min_refresh"}},
		{"bad authorization server", func(c *Config) { c.OAuth.AuthorizationServers = []string{"https://ok.test", "ftp://x"} }, []string{"oauth.authorization_servers[1]"}},
		{"bad scopes", func(c *Config) { c.ScopesSupported = []string{"ok", "two words", `q"uote`, ""} }, []string{"scopes_supported[1]", "scopes_supported[2]", "scopes_supported[3]"}},
		{"offline_access", func(c *Config) { c.ScopesSupported = []string{"offline_access"} }, []string{"scopes_supported[0]"}},
		{"empty api_keys", func(c *Config) { c.APIKeys = &APIKeysConfig{} }, []string{"api_keys"}},
		{"bad keys", func(c *Config) {
			c.APIKeys.Keys = append(c.APIKeys.Keys,
				APIKey{Name: "ci", SHA256: HashAPIKey("k3")},
				APIKey{Name: "has space", SHA256: "abc"},
				APIKey{Name: "dup", SHA256: HashAPIKey("k1")},
				APIKey{Name: "ctl", SHA256: HashAPIKey("k4"), Principal: " bob", Tenant: "a\nb", Scopes: []string{"a b"}, Groups: []string{""}},
			)
		}, []string{
			"api_keys.keys[2].name",
			"api_keys.keys[3].name", "api_keys.keys[3].sha256",
			"api_keys.keys[4].sha256",
			"api_keys.keys[5].principal", "api_keys.keys[5].tenant", "api_keys.keys[5].scopes[0]", "api_keys.keys[5].groups[0]",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			if diff := cmp.Diff(tt.want, fieldPaths(t, c.Validate())); diff != "" {
				t.Errorf("error paths mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaults(t *testing.T) {
	c := validConfig()
	c.SetDefaults()
	want := &OAuthConfig{
		Issuer:               "https://login.test/",
		JWKSURL:              "https://login.test/keys",
		Algorithms:           []string{"RS256", "ES256"},
		Leeway:               30 * time.Second,
		PrincipalClaim:       "sub",
		ScopesClaim:          "scope",
		AuthorizationServers: []string{"https://login.test/"},
		JWKSMinRefresh:       5 * time.Minute,
	}
	if diff := cmp.Diff(want, c.OAuth); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
	set := &OAuthConfig{Algorithms: []string{"ES256"}, Leeway: time.Second, PrincipalClaim: "oid", ScopesClaim: "scp", AuthorizationServers: []string{"https://as.test"}, JWKSMinRefresh: time.Minute}
	c = Config{OAuth: set}
	before := *set
	c.SetDefaults()
	if diff := cmp.Diff(&before, c.OAuth); diff != "" {
		t.Errorf("SetDefaults overwrote set values (-want +got):\n%s", diff)
	}
}

func TestNewDoesNotChangeTheCallersConfig(t *testing.T) {
	c := validConfig()
	c.OAuth.Issuer, c.OAuth.JWKSURL = "http://127.0.0.1:1", "http://127.0.0.1:1/jwks" // nothing listens
	if _, err := New(t.Context(), c, nil); err != nil {
		t.Fatal(err)
	}
	if c.OAuth.Algorithms != nil || c.OAuth.Leeway != 0 {
		t.Errorf("New applied defaults to the caller's config: %+v", c.OAuth)
	}
}

func TestNewReportsInvalidConfig(t *testing.T) {
	c := validConfig()
	c.OAuth.Algorithms = []string{"HS256"}
	_, err := New(t.Context(), c, nil)
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Path != "oauth.algorithms[0]" {
		t.Errorf("New = %v, want a FieldError at oauth.algorithms[0]", err)
	}
}
