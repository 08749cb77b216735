// Package authtest is an in-process OAuth authorization server for tests and
// for `jobbridge demo --auth`: it publishes a JWK Set (an RS256 and an ES256
// key, rotatable) on a loopback address, counts how often the set is
// fetched, and mints access tokens, valid ones and deliberately broken ones
// (expired, not yet valid, alg none, HS256 signed with the public key, bad
// signature, unknown key ID, oversized, ...).
//
// Endpoints, under [Issuer.URL]:
//
//	GET  /jwks.json                               the JWK Set
//	GET  /.well-known/oauth-authorization-server  RFC 8414 metadata (also at /.well-known/openid-configuration)
//	POST /token                                   client_credentials grant: form client_id (becomes sub),
//	                                              scope, resource (becomes aud); no client authentication
//
// It is a test fixture: it authenticates nobody and refuses to listen on
// anything but a loopback address.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Issuer is a running test authorization server. It is safe for concurrent
// use.
type Issuer struct {
	url string
	ln  net.Listener
	srv *http.Server
	// fatalf reports a failure to mint a token; NewIssuer sets it to the
	// test's Fatalf.
	fatalf func(format string, args ...any)

	mu         sync.Mutex
	published  []*signingKey
	current    map[string]*signingKey // by key type: "RSA", "EC"
	strangers  map[string]*signingKey // unpublished keys, made on demand
	generation int

	fetches    atomic.Int64
	failStatus atomic.Int64
}

// signingKey is a private key and how it is published.
type signingKey struct {
	kid string
	alg string // the JWK's alg: RS256 or ES256
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func (k *signingKey) private() any {
	if k.rsa != nil {
		return k.rsa
	}
	return k.ec
}

// NewIssuerServer starts an issuer on addr, which must be a loopback
// address ("127.0.0.1:0" picks a free port). Close it when done.
func NewIssuerServer(addr string) (*Issuer, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("test issuer address %q: %w", addr, err)
	}
	if !loopback(host) {
		return nil, fmt.Errorf("test issuer address %q: only loopback addresses are allowed", addr)
	}
	i := &Issuer{
		current:   map[string]*signingKey{},
		strangers: map[string]*signingKey{},
	}
	if err := i.Rotate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting test issuer: %w", err)
	}
	i.ln = ln
	i.url = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", i.serveJWKS)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", i.serveMetadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", i.serveMetadata)
	mux.HandleFunc("POST /token", i.serveToken)
	i.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go i.srv.Serve(ln)
	return i, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Close stops the server.
func (i *Issuer) Close() error { return i.srv.Close() }

// URL is the issuer identifier, e.g. "http://127.0.0.1:41234": the iss of
// its tokens and oauth.issuer in a configuration.
func (i *Issuer) URL() string { return i.url }

// JWKSURL is where the JWK Set is published: oauth.jwks_url.
func (i *Issuer) JWKSURL() string { return i.url + "/jwks.json" }

// JWKSFetches is how many times the JWK Set has been requested.
func (i *Issuer) JWKSFetches() int64 { return i.fetches.Load() }

// FailJWKS makes the JWK Set endpoint answer status (e.g. 503) until called
// again with 0.
func (i *Issuer) FailJWKS(status int) { i.failStatus.Store(int64(status)) }

// Rotate publishes a new RSA key (RS256) and a new EC P-256 key (ES256) and
// signs with them from now on. The previous keys stay published.
func (i *Issuer) Rotate() error {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating RSA key: %w", err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating EC key: %w", err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.generation++
	r := &signingKey{kid: fmt.Sprintf("rs256-%d", i.generation), alg: "RS256", rsa: rk}
	e := &signingKey{kid: fmt.Sprintf("es256-%d", i.generation), alg: "ES256", ec: ek}
	i.published = append(i.published, r, e)
	i.current["RSA"], i.current["EC"] = r, e
	return nil
}

// KeyIDs lists the published key IDs, oldest first.
func (i *Issuer) KeyIDs() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	ids := make([]string, len(i.published))
	for n, k := range i.published {
		ids[n] = k.kid
	}
	return ids
}

// key returns the current key of a type, or an unpublished one.
func (i *Issuer) key(kty string, stranger bool) (*signingKey, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !stranger {
		return i.current[kty], nil
	}
	if k := i.strangers[kty]; k != nil {
		return k, nil
	}
	k := &signingKey{kid: "stranger-" + randomID()}
	var err error
	if kty == "RSA" {
		k.alg = "RS256"
		k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		k.alg = "ES256"
		k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("generating unpublished key: %w", err)
	}
	i.strangers[kty] = k
	return k, nil
}

// jwk is a public key in JWK form.
type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

func (k *signingKey) jwk() (jwk, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	j := jwk{Use: "sig", Alg: k.alg, Kid: k.kid}
	if k.rsa != nil {
		j.Kty = "RSA"
		j.N = b64(k.rsa.N.Bytes())
		j.E = b64(big.NewInt(int64(k.rsa.E)).Bytes())
		return j, nil
	}
	point, err := k.ec.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		return jwk{}, err
	}
	size := (len(point) - 1) / 2
	j.Kty, j.Crv = "EC", "P-256"
	j.X, j.Y = b64(point[1:1+size]), b64(point[1+size:])
	return j, nil
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	i.fetches.Add(1)
	if status := int(i.failStatus.Load()); status != 0 {
		http.Error(w, "JWK Set unavailable", status)
		return
	}
	i.mu.Lock()
	keys := make([]jwk, 0, len(i.published))
	var err error
	for _, k := range i.published {
		var j jwk
		if j, err = k.jwk(); err != nil {
			break
		}
		keys = append(keys, j)
	}
	i.mu.Unlock()
	if err != nil {
		http.Error(w, "encoding keys failed", http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

func (i *Issuer) serveMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                i.url,
		"jwks_uri":                              i.JWKSURL(),
		"token_endpoint":                        i.url + "/token",
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"response_types_supported":              []string{},
	})
}

// serveToken implements the client_credentials grant without client
// authentication: client_id becomes sub, resource becomes aud.
func (i *Issuer) serveToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	client := r.PostForm.Get("client_id")
	if client == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "client_id is required"})
		return
	}
	claims := map[string]any{"sub": client, "client_id": client}
	if res := r.PostForm.Get("resource"); res != "" {
		claims["aud"] = res
	}
	scope := r.PostForm.Get("scope")
	if scope != "" {
		claims["scope"] = scope
	}
	const ttl = time.Hour
	tok, err := i.Sign(claims, ExpiresIn(ttl))
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	resp := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(ttl / time.Second)}
	if scope != "" {
		resp["scope"] = scope
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
