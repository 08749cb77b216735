package rest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/internal/fielderr"
	"github.com/jobbridge/jobbridge/secrets"
)

// OAuth2Config is a backend's `oauth2:` block: the adapter obtains an access
// token with the OAuth 2.0 client credentials grant (RFC 6749 §4.4) and sends
// it as "Authorization: Bearer <token>" on every request to the backend.
//
//	oauth2:
//	  token_url: https://login.example.com/oauth2/token
//	  client_id: ${CLIENT_ID}
//	  client_secret: ${file:/var/run/secrets/jobs/client-secret}
//	  scopes: [jobs.run]
//	  endpoint_params: {audience: "https://jobs.example.com"}
//
// The token is fetched when first needed, through the same egress checks as
// the backend's own requests (the token endpoint's address must be public or
// under allow_networks) and without following redirects. It is kept until
// shortly before it expires, or until the backend answers 401, and is
// redacted from every error, log and observation.
type OAuth2Config struct {
	// TokenURL is the token endpoint: an absolute http:// or https:// URL
	// without credentials.
	TokenURL string `yaml:"token_url"`
	// ClientID identifies the client. It may be written literally or as
	// ${NAME} (an environment variable, read at start) or ${file:/path} (a
	// file, re-read when it changes).
	ClientID string `yaml:"client_id"`
	// ClientSecret is the client's secret, written like ClientID. It is
	// redacted everywhere, also when written literally.
	ClientSecret string `yaml:"client_secret"`
	// Scopes are requested with the token, space-separated on the wire.
	Scopes []string `yaml:"scopes"`
	// EndpointParams are extra form parameters of the token request, for
	// example audience or resource.
	EndpointParams map[string]string `yaml:"endpoint_params"`
	// AuthStyle says how the client authenticates to the token endpoint:
	// "header" (HTTP Basic) or "params" (client_id and client_secret in the
	// form). Default: try header, then params, and remember what worked.
	AuthStyle string `yaml:"auth_style"`
}

// reservedTokenParams are form parameters the adapter sets itself.
var reservedTokenParams = []string{"grant_type", "scope", "client_id", "client_secret"}

// Validate reports every problem in the oauth2 block, joined, each as an
// [adapters.FieldError] whose path is relative to the block (for example
// "token_url"). The client secret never appears in its errors.
func (c *OAuth2Config) Validate() error {
	var errs []error
	if err := checkTokenURL(c.TokenURL); err != nil {
		errs = append(errs, adapters.Fieldf("token_url", "%v", err))
	}
	for _, f := range []struct{ path, value string }{{"client_id", c.ClientID}, {"client_secret", c.ClientSecret}} {
		if f.value == "" {
			errs = append(errs, adapters.Fieldf(f.path, "required"))
			continue
		}
		if _, err := parseCredential(f.value); err != nil {
			errs = append(errs, credentialFieldErr(f.path, err))
		}
	}
	for i, s := range c.Scopes {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
			errs = append(errs, adapters.Fieldf(fmt.Sprintf("scopes[%d]", i), "a scope is one non-empty word of printable ASCII without spaces, quotes or backslashes"))
		}
	}
	for _, k := range sortedKeys(c.EndpointParams) {
		switch {
		case k == "":
			errs = append(errs, adapters.Fieldf("endpoint_params", "empty parameter name"))
		case slices.Contains(reservedTokenParams, k):
			errs = append(errs, adapters.Fieldf("endpoint_params."+k, "is set by the adapter (use client_id, client_secret and scopes)"))
		}
	}
	switch c.AuthStyle {
	case "", "header", "params":
	default:
		errs = append(errs, adapters.Fieldf("auth_style", "%q is not one of header, params", c.AuthStyle))
	}
	return errors.Join(errs...)
}

func checkTokenURL(raw string) error {
	u, err := parseHTTPURL(raw, "set client_id and client_secret")
	switch {
	case err != nil:
		return err
	case u.Fragment != "":
		return errors.New("must not have a fragment")
	}
	return nil
}

// parseCredential parses a client_id or client_secret: literal text with
// ${NAME} and ${file:/path} references.
func parseCredential(s string) (expr.Template, error) {
	if strings.ContainsAny(s, "\r\n\x00") {
		return expr.Template{}, errors.New("contains a line break or NUL")
	}
	return expr.ParseTemplate(s, expr.Scope{Secrets: true})
}

// credentialFieldErr is a field error for a credential that does not
// parse, pointing inside the value when the parser says where. The parser's
// message may quote a piece of the value, so for client_secret it is
// replaced by one that quotes nothing.
func credentialFieldErr(path string, err error) error {
	var e *expr.Error
	if !errors.As(err, &e) {
		return adapters.Fieldf(path, "%v", err)
	}
	if strings.HasSuffix(path, "client_secret") {
		return fielderr.New(path, e.Offset, errors.New("is not text with ${NAME} or ${file:/absolute/path} references (placeholders in braces are not allowed here)"))
	}
	return fielderr.New(path, e.Offset, e)
}

// prefixFields prefixes the path of every [adapters.FieldError] in err
// (a joined error or a single one) with prefix, so that a sub-block's
// Validate errors read as the enclosing block's.
func prefixFields(prefix string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, prefixFields(prefix, e))
		}
		return errors.Join(out...)
	}
	var fe *adapters.FieldError
	if errors.As(err, &fe) {
		return fielderr.New(strings.TrimSuffix(prefix+fe.Path, "."), fe.Offset, fe.Err)
	}
	return adapters.Fieldf(strings.TrimSuffix(prefix, "."), "%w", err)
}

// credentials resolves the secrets of one backend: ${NAME} and
// ${file:/path} references in header values and in the oauth2 block
// (through a [secrets.Source], which re-reads a rotated file and registers
// every value with the redactor), and the OAuth 2.0 access token. It is
// safe for concurrent use.
type credentials struct {
	src *secrets.Source
	red *secrets.Redactor

	oauth *oauthSource // nil without an oauth2 block
}

// newCredentials returns the credentials of a backend. client is the
// adapter's egress-checked, non-redirecting client, used for the token
// endpoint; oauth may be nil, and is expected to have passed
// [OAuth2Config.Validate]. It resolves the oauth2 block's references at
// once, so that an unset variable or unreadable file is reported at start;
// its errors are [adapters.FieldError]s with paths under "oauth2.".
func newCredentials(src *secrets.Source, oauth *OAuth2Config, client *http.Client) (*credentials, error) {
	red := src.Redactor()
	c := &credentials{src: src, red: red}
	if oauth == nil {
		return c, nil
	}
	if client == nil {
		return nil, errors.New("oauth2: no HTTP client for the token endpoint") // a wiring mistake
	}
	o := &oauthSource{
		creds:    c,
		client:   client,
		tokenURL: oauth.TokenURL,
		now:      time.Now,
		sem:      make(chan struct{}, 1),
		cfg: clientcredentials.Config{
			TokenURL: oauth.TokenURL,
			Scopes:   slices.Clone(oauth.Scopes),
		},
	}
	if len(oauth.EndpointParams) > 0 {
		o.cfg.EndpointParams = url.Values{}
		for k, v := range oauth.EndpointParams {
			o.cfg.EndpointParams.Set(k, v)
		}
	}
	switch oauth.AuthStyle {
	case "header":
		o.cfg.AuthStyle = oauth2.AuthStyleInHeader
	case "params":
		o.cfg.AuthStyle = oauth2.AuthStyleInParams
	}
	var errs []error
	for _, f := range []struct {
		path, value string
		t           *expr.Template
	}{{"oauth2.client_id", oauth.ClientID, &o.id}, {"oauth2.client_secret", oauth.ClientSecret, &o.secret}} {
		t, err := parseCredential(f.value)
		if err != nil {
			errs = append(errs, credentialFieldErr(f.path, err))
			continue
		}
		if _, err := c.render(t); err != nil {
			errs = append(errs, adapters.Fieldf(f.path, "%w", err))
		}
		*f.t = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s, _ := c.render(o.secret); s != "" {
		red.AddFrom("oauth2:client_secret", s) // also a literal one
	}
	c.oauth = o
	return c, nil
}

// secret returns the current value of a secret reference (see
// [secrets.Source]): an environment variable, read once, or a file, read
// again whenever it changes and after [credentials.refresh]. Its errors
// name the variable or the file and the problem, never a value.
func (c *credentials) secret(ref expr.SecretRef) (string, error) {
	return c.src.Value(ref)
}

// render renders a template of literal text and secret references (a
// client_id or client_secret).
func (c *credentials) render(t expr.Template) (string, error) {
	var b strings.Builder
	for _, seg := range t.Segments() {
		switch {
		case seg.Secret != nil:
			v, err := c.secret(*seg.Secret)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
		case seg.Name != "" || seg.Expr != nil:
			return "", errors.New("takes no placeholders") // Validate refuses them
		default:
			b.WriteString(seg.Lit)
		}
	}
	return b.String(), nil
}

// authorize sets the request's Authorization header to the backend's OAuth
// 2.0 access token, fetching one when none is cached or the cached one is
// about to expire. Without an oauth2 block it does nothing.
func (c *credentials) authorize(req *http.Request) error {
	if c == nil || c.oauth == nil {
		return nil
	}
	tok, err := c.oauth.token(req.Context())
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", tok.Type()+" "+tok.AccessToken)
	return nil
}

// refresh forgets what may have gone stale after a 401 answer: the cached
// contents of every secret file and the cached access token, so that the
// next secret and authorize calls read fresh ones. Environment variables
// are read once and stay.
func (c *credentials) refresh() { c.refreshRejected("") }

// refreshRejected is refresh after a 401 answer to a request that carried
// the Authorization header rejected: the cached access token is dropped only
// when it is the one rejected (or rejected is empty), so that the 401
// answers of concurrent requests sent with an old token do not each drop
// the new one. Cached files are always forgotten: reading one is cheap.
func (c *credentials) refreshRejected(rejected string) {
	if c == nil {
		return
	}
	c.src.Refresh()
	if c.oauth != nil {
		c.oauth.drop(rejected)
	}
}

// refreshable reports whether refresh may change what requests carry: the
// backend has an oauth2 block or uses secret files.
func (c *credentials) refreshable() bool {
	if c == nil {
		return false
	}
	return c.oauth != nil || c.src.UsesFiles()
}

// tokenExpiryMargin is how long before its expiry a token is renewed, so
// that it does not expire on the way (x/oauth2's own margin).
const tokenExpiryMargin = 10 * time.Second

// oauthSource fetches and caches a backend's OAuth 2.0 access token with
// x/oauth2's client credentials flow. It keeps its own cache rather than
// x/oauth2's ReuseTokenSource, so that each fetch runs under the context of
// the request that needs it (and ends with it), and so that a token the
// backend rejected can be dropped.
type oauthSource struct {
	creds      *credentials
	client     *http.Client
	tokenURL   string
	id, secret expr.Template
	now        func() time.Time

	// sem admits one fetch at a time; its holder alone uses cfg, whose
	// ClientID and ClientSecret it sets before each fetch (they may come
	// from files that change). cfg also remembers which auth style worked.
	sem chan struct{}
	cfg clientcredentials.Config

	mu  sync.Mutex
	tok *oauth2.Token
	// expiry is when tok expires on o.now's clock (zero: never), from the
	// lifetime the token endpoint gave (expires_in).
	expiry time.Time
}

// cached returns the cached token if it is still good for a while.
func (o *oauthSource) cached() *oauth2.Token {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tok == nil || o.tok.AccessToken == "" {
		return nil
	}
	if !o.expiry.IsZero() && !o.now().Add(tokenExpiryMargin).Before(o.expiry) {
		o.tok = nil
		return nil
	}
	return o.tok
}

func (o *oauthSource) drop(rejected string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tok != nil && (rejected == "" || rejected == o.tok.Type()+" "+o.tok.AccessToken) {
		o.tok = nil
	}
}

// token returns a valid access token, fetching one when needed. Concurrent
// callers share one fetch; a caller whose ctx ends while it waits returns.
func (o *oauthSource) token(ctx context.Context) (*oauth2.Token, error) {
	if t := o.cached(); t != nil {
		return t, nil
	}
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("fetching an OAuth 2.0 token: %w", ctx.Err())
	}
	defer func() { <-o.sem }()
	if t := o.cached(); t != nil {
		return t, nil
	}
	id, err := o.creds.render(o.id)
	if err != nil {
		return nil, fmt.Errorf("oauth2 client_id: %w", err)
	}
	secret, err := o.creds.render(o.secret)
	if err != nil {
		return nil, fmt.Errorf("oauth2 client_secret: %w", err)
	}
	red := o.creds.red
	red.AddFrom("oauth2:client_secret", secret)
	// The forms in which the secret travels, should an endpoint echo them.
	red.AddFrom("oauth2:client_secret:form", url.QueryEscape(secret))
	red.AddFrom("oauth2:basic", base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret))))
	o.cfg.ClientID, o.cfg.ClientSecret = id, secret

	// The token request goes through the adapter's client (egress checks, no
	// redirects, its timeout), and is not one of the request's own attempts:
	// it must not count as the request having been sent.
	fctx := context.WithValue(ctx, oauth2.HTTPClient, o.client)
	fctx = context.WithValue(fctx, sendRecordKey{}, (*sendRecord)(nil))
	tok, err := o.cfg.Token(fctx)
	if err != nil {
		return nil, o.describe(err)
	}
	if strings.ContainsFunc(tok.AccessToken, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("fetching an OAuth 2.0 token from %s: the access token contains control characters and cannot be sent in a header", o.tokenURL)
	}
	red.AddFrom("oauth2:access_token", tok.AccessToken)
	if tok.RefreshToken != "" {
		red.AddFrom("oauth2:refresh_token", tok.RefreshToken)
	}
	o.mu.Lock()
	o.tok, o.expiry = tok, time.Time{}
	if !tok.Expiry.IsZero() {
		o.expiry = o.now().Add(time.Until(tok.Expiry))
	}
	o.mu.Unlock()
	return tok, nil
}

// describe turns a token fetch error into one without secrets: the token
// endpoint's answer (which [oauth2.RetrieveError] quotes whole) is reduced
// to its status and error code and description, or its message, redacted.
func (o *oauthSource) describe(err error) error {
	red := o.creds.red
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		s := "the token endpoint answered"
		if re.Response != nil {
			s += " HTTP " + fmt.Sprint(re.Response.StatusCode)
		}
		text := re.ErrorCode
		if re.ErrorDescription != "" {
			text += ": " + re.ErrorDescription
		}
		if text == "" {
			text = apiText(re.Body)
		}
		if t := red.Clean(text, maxAPIText); t != "" {
			s += ": " + t
		}
		return fmt.Errorf("fetching an OAuth 2.0 token from %s: %s", o.tokenURL, s)
	}
	if msg := err.Error(); red.Redact(msg) != msg {
		return fmt.Errorf("fetching an OAuth 2.0 token from %s: %s", o.tokenURL, red.Clean(msg, maxAPIText))
	}
	return fmt.Errorf("fetching an OAuth 2.0 token from %s: %w", o.tokenURL, err)
}

// signKey is the context key of a request's signer.
type signKey struct{}

// withSigner returns ctx carrying sign, which [Adapter.do] calls on a
// request before its first try and again before the one retry after a 401
// answer (after refreshing the credentials): it sets the headers that carry
// secrets (rendering them with [credentials.secret]) and the OAuth token
// (with [credentials.authorize]).
func withSigner(ctx context.Context, sign func(*http.Request) error) context.Context {
	return context.WithValue(ctx, signKey{}, sign)
}

// signer returns the signer ctx carries, or nil.
func signer(ctx context.Context) func(*http.Request) error {
	sign, _ := ctx.Value(signKey{}).(func(*http.Request) error)
	return sign
}
