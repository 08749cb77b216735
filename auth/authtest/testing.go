package authtest

import "testing"

// NewIssuer starts an issuer on a free loopback port for the test and
// closes it when the test ends. [Issuer.Token] failures fail the test.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	i, err := NewIssuerServer("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting test issuer: %v", err)
	}
	i.fatalf = t.Fatalf
	t.Cleanup(func() { i.Close() })
	return i
}
