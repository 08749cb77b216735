package auth

import (
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/auth/authtest"
)

// BenchmarkAuthenticate measures one request's authentication with each
// kind of credential (keys already fetched; no network in the loop).
func BenchmarkAuthenticate(b *testing.B) {
	iss := authtest.NewIssuer(b)
	cfg := testConfig(iss)
	a, err := New(b.Context(), cfg, &Options{Now: func() time.Time { return testNow }})
	if err != nil {
		b.Fatal(err)
	}
	at := authtest.At(testNow)
	for _, bc := range []struct{ name, credential string }{
		{"jwt-rs256", iss.Token(claims(nil), at)},
		{"jwt-es256", iss.Token(claims(nil), at, authtest.Alg("ES256"))},
		{"api-key", testKey},
		{"unknown-kid", iss.Token(claims(nil), at, authtest.UnknownKID())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := bearer(bc.credential)
			for b.Loop() {
				a.Authenticate(r)
			}
		})
	}
}
