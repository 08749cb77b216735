package authtest

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var errUnknownAlg = errors.New("unknown signing algorithm")

// TokenOption changes how [Issuer.Sign] mints a token.
type TokenOption func(*tokenSpec)

type tokenSpec struct {
	alg        string
	kid        *string
	noKID      bool
	header     map[string]any
	now        time.Time
	ttl        time.Duration
	expired    bool
	notYet     bool
	future     bool
	none       bool
	hsPublic   bool
	badSig     bool
	unknownKID bool
	size       int
}

// Alg signs with the given algorithm: RS256 (the default), RS384, RS512,
// PS256, PS384 and PS512 with the current RSA key, ES256 with the current
// EC key. The keys are published with alg RS256 and ES256, so tokens with
// the other algorithms only test an allow-list: a verifier that honours the
// JWK's alg refuses them even when it allows the algorithm.
func Alg(alg string) TokenOption { return func(s *tokenSpec) { s.alg = alg } }

// KeyID sets the kid header.
func KeyID(kid string) TokenOption { return func(s *tokenSpec) { s.kid = &kid } }

// NoKeyID leaves the kid header out.
func NoKeyID() TokenOption { return func(s *tokenSpec) { s.noKID = true } }

// Header sets a header parameter (e.g. "typ" to "at+jwt", or "crit"); nil
// removes it.
func Header(name string, value any) TokenOption {
	return func(s *tokenSpec) {
		if s.header == nil {
			s.header = map[string]any{}
		}
		s.header[name] = value
	}
}

// At mints the token as if the time were t (iat, and exp relative to it).
// Default: now.
func At(t time.Time) TokenOption { return func(s *tokenSpec) { s.now = t } }

// ExpiresIn sets the lifetime (default one hour).
func ExpiresIn(d time.Duration) TokenOption { return func(s *tokenSpec) { s.ttl = d } }

// Expired mints a token that expired an hour ago.
func Expired() TokenOption { return func(s *tokenSpec) { s.expired = true } }

// NotYetValid sets nbf an hour ahead.
func NotYetValid() TokenOption { return func(s *tokenSpec) { s.notYet = true } }

// IssuedInFuture sets iat an hour ahead.
func IssuedInFuture() TokenOption { return func(s *tokenSpec) { s.future = true } }

// AlgNone mints an unsigned token with alg "none".
func AlgNone() TokenOption { return func(s *tokenSpec) { s.none = true } }

// HS256WithPublicKey signs with HS256, using the PEM of the current RSA
// public key as the HMAC secret and its kid: the algorithm-confusion attack.
func HS256WithPublicKey() TokenOption { return func(s *tokenSpec) { s.hsPublic = true } }

// BadSignature corrupts the signature.
func BadSignature() TokenOption { return func(s *tokenSpec) { s.badSig = true } }

// UnknownKID signs with a key that is not published, under a fresh random
// key ID.
func UnknownKID() TokenOption { return func(s *tokenSpec) { s.unknownKID = true } }

// Oversized pads the claims so that the token is longer than n bytes.
func Oversized(n int) TokenOption { return func(s *tokenSpec) { s.size = n } }

// Sign mints a token. The claims start as iss = [Issuer.URL], iat = now,
// exp = now + 1h and a random jti; the options adjust them, then claims
// override them (a nil value removes a claim). Give "aud" (the resource) and
// "sub" yourself.
func (i *Issuer) Sign(claims map[string]any, opts ...TokenOption) (string, error) {
	spec := tokenSpec{alg: "RS256", now: time.Now(), ttl: time.Hour}
	for _, o := range opts {
		o(&spec)
	}
	c := jwt.MapClaims{
		"iss": i.url,
		"iat": spec.now.Unix(),
		"exp": spec.now.Add(spec.ttl).Unix(),
		"jti": randomID(),
	}
	if spec.expired {
		c["iat"], c["exp"] = spec.now.Add(-2*time.Hour).Unix(), spec.now.Add(-time.Hour).Unix()
	}
	if spec.notYet {
		c["nbf"] = spec.now.Add(time.Hour).Unix()
	}
	if spec.future {
		c["iat"] = spec.now.Add(time.Hour).Unix()
	}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	if spec.size > 0 {
		c["pad"] = strings.Repeat("x", spec.size)
	}

	switch {
	case spec.none:
		t := jwt.NewWithClaims(jwt.SigningMethodNone, c)
		spec.setHeaders(t, "")
		return t.SignedString(jwt.UnsafeAllowNoneSignatureType)
	case spec.hsPublic:
		k, err := i.key("RSA", false)
		if err != nil {
			return "", err
		}
		der, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
		if err != nil {
			return "", fmt.Errorf("encoding public key: %w", err)
		}
		secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		t := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
		spec.setHeaders(t, k.kid)
		return t.SignedString(secret)
	}

	method := jwt.GetSigningMethod(spec.alg)
	kty := "RSA"
	switch {
	case method == nil:
		return "", fmt.Errorf("%w %q", errUnknownAlg, spec.alg)
	case spec.alg == "ES256":
		kty = "EC"
	case !strings.HasPrefix(spec.alg, "RS") && !strings.HasPrefix(spec.alg, "PS"):
		return "", fmt.Errorf("%w %q: the issuer has RSA and P-256 keys", errUnknownAlg, spec.alg)
	}
	k, err := i.key(kty, spec.unknownKID)
	if err != nil {
		return "", err
	}
	t := jwt.NewWithClaims(method, c)
	spec.setHeaders(t, k.kid)
	s, err := t.SignedString(k.private())
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	if spec.badSig {
		s = corrupt(s)
	}
	return s, nil
}

// Token is [Issuer.Sign] for tests: a failure to mint fails the test (an
// issuer made by [NewIssuerServer] panics instead).
func (i *Issuer) Token(claims map[string]any, opts ...TokenOption) string {
	s, err := i.Sign(claims, opts...)
	if err != nil {
		if i.fatalf != nil {
			i.fatalf("minting token: %v", err)
		}
		panic(fmt.Sprintf("minting token: %v", err))
	}
	return s
}

func (s *tokenSpec) setHeaders(t *jwt.Token, kid string) {
	if kid != "" {
		t.Header["kid"] = kid
	}
	if s.kid != nil {
		t.Header["kid"] = *s.kid
	}
	if s.noKID {
		delete(t.Header, "kid")
	}
	for k, v := range s.header {
		if v == nil {
			delete(t.Header, k)
		} else {
			t.Header[k] = v
		}
	}
}

// corrupt flips the bits of the signature's first byte.
func corrupt(token string) string {
	dot := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[dot+1:])
	if err != nil || len(sig) == 0 {
		return token + "x"
	}
	sig[0] ^= 0xff
	return token[:dot+1] + base64.RawURLEncoding.EncodeToString(sig)
}
