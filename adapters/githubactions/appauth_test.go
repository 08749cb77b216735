package githubactions

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

const (
	testAppID          = 31337
	testInstallationID = 4711
)

// testAppKey is generated once: RSA key generation is slow under -race.
var testAppKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// writeKey writes key as PEM (PKCS#1 or PKCS#8) to a temporary file.
func writeKey(t *testing.T, key *rsa.PrivateKey, pkcs8 bool) string {
	t.Helper()
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if pkcs8 {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	return writeFile(t, pem.EncodeToMemory(block))
}

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// appScripts are runs that take 90 minutes, longer than an installation
// token lives.
func appScripts() map[string]githubfake.Script {
	return map[string]githubfake.Script{"long": {
		RunName: "Long [{inputs.correlation_id}]",
		Jobs:    []githubfake.JobScript{{Name: "soak", Duration: 90 * time.Minute}},
	}}
}

// appFixture is a fake that is a GitHub App installation with hour-long
// tokens and accepts no other credential.
func appFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, fixtureOptions{scripts: appScripts(), fake: func(o *githubfake.Options) {
		o.Tokens = nil
		o.AppPublicKey = &testAppKey().PublicKey
		o.AppID, o.InstallationID = testAppID, testInstallationID
	}})
}

// withApp switches the backend from token to app authentication.
func withApp(keyFile string) func(*BackendConfig, map[string]JobConfig) {
	return func(b *BackendConfig, _ map[string]JobConfig) {
		b.Token = ""
		b.App = &AppConfig{AppID: testAppID, InstallationID: testInstallationID, PrivateKeyFile: keyFile}
	}
}

// TestAppAuthEndToEnd runs a job with GitHub App authentication, across two
// token renewals: each renewal is one exchange, the ETag cache starts afresh
// for the new token (a 200, not another token's cached answer), and the job
// completes.
func TestAppAuthEndToEnd(t *testing.T) {
	for _, pkcs8 := range []bool{false, true} {
		t.Run(fmt.Sprintf("pkcs8=%v", pkcs8), func(t *testing.T) {
			f := appFixture(t)
			a := f.adapter(withApp(writeKey(t, testAppKey(), pkcs8)))
			ref := f.start(a, "scripted", map[string]any{"script": "long"}, "corr-app")
			if got := f.gh.TokenExchanges(); got != 1 {
				t.Fatalf("TokenExchanges after Start = %d, want 1", got)
			}
			first := f.poll(a, ref)
			if first.State != adapters.StateWorking {
				t.Fatalf("state %v (%s), want working", first.State, first.Message)
			}

			// Unchanged run, same token: a 304.
			nm := f.gh.NotModified()
			f.clock.Advance(54 * time.Minute)
			f.poll(a, ref)
			if got := f.gh.NotModified() - nm; got != 1 || f.gh.TokenExchanges() != 1 {
				t.Errorf("before renewal: %d 304 answers and %d exchanges, want 1 and 1", got, f.gh.TokenExchanges())
			}

			// Five minutes before expiry the token is renewed; the run is
			// fetched afresh with it.
			f.clock.Advance(2 * time.Minute)
			nm, req := f.gh.NotModified(), f.gh.Requests()
			o := f.poll(a, ref)
			if got := f.gh.TokenExchanges(); got != 2 {
				t.Errorf("TokenExchanges after renewal = %d, want 2", got)
			}
			if f.gh.NotModified() != nm || f.gh.Requests() == req {
				t.Errorf("after renewal: %d 304 answers of %d requests, want a fresh 200", f.gh.NotModified()-nm, f.gh.Requests()-req)
			}
			if o.State != first.State || o.Message != first.Message {
				t.Errorf("after renewal: %v %q, want %v %q", o.State, o.Message, first.State, first.Message)
			}

			f.clock.Advance(time.Hour)
			done := f.poll(a, ref)
			if done.State != adapters.StateSucceeded || f.gh.TokenExchanges() != 3 {
				t.Errorf("finally: %v (%s) after %d exchanges, want succeeded after 3", done.State, done.Message, f.gh.TokenExchanges())
			}
		})
	}
}

// TestAppTokenRenewalIsShared checks that concurrent requests that find the
// token due share one exchange.
func TestAppTokenRenewalIsShared(t *testing.T) {
	f := appFixture(t)
	a := f.adapter(withApp(writeKey(t, testAppKey(), false)))
	var refs []adapters.JobRef
	for i := range 6 {
		refs = append(refs, f.start(a, "scripted", map[string]any{"script": "long"}, fmt.Sprintf("corr-%d", i)))
	}
	f.clock.Advance(58 * time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(refs))
	for range 8 {
		wg.Go(func() {
			obs, err := a.Poll(t.Context(), refs)
			if err != nil {
				errs <- err
				return
			}
			for _, o := range obs {
				if o.Err != nil {
					errs <- o.Err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("poll: %v", err)
	}
	if got := f.gh.TokenExchanges(); got != 2 {
		t.Errorf("TokenExchanges = %d, want 2 (one at Start, one shared renewal)", got)
	}
}

// TestAppKeyFileErrors checks that a bad private key file is refused at New
// with an error naming the file and the problem, never its contents.
func TestAppKeyFileErrors(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	const secretish = "c2VjcmV0LWtleS1tYXRlcmlhbA"
	tests := []struct {
		name     string
		contents []byte // nil: no file
		want     string
	}{
		{"missing", nil, "reading the private key file: open "},
		{"not PEM", []byte("-----BEGIN NOTHING\n" + secretish + "\n"), ": no PEM block"},
		{"a certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(secretish)}), `PEM block "CERTIFICATE" is not an RSA private key`},
		{"corrupt PKCS#1", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte(secretish)}), "not a valid PKCS#1 RSA private key"},
		{"corrupt PKCS#8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte(secretish)}), "not a valid PKCS#8 private key"},
		{"an EC key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), "*ecdsa.PrivateKey, not an RSA private key"},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "missing.pem")
			if c.contents != nil {
				path = writeFile(t, c.contents)
			}
			_, err := New("github", BackendConfig{App: &AppConfig{AppID: 1, InstallationID: 2, PrivateKeyFile: path}}, nil, nil)
			if err == nil {
				t.Fatal("New accepted the key file")
			}
			msg := err.Error()
			if !strings.Contains(msg, "app.private_key_file") || !strings.Contains(msg, path) || !strings.Contains(msg, c.want) {
				t.Errorf("error %q, want one naming app.private_key_file, %s and %q", msg, path, c.want)
			}
			if strings.Contains(msg, secretish) || strings.Contains(msg, "BEGIN") {
				t.Errorf("error %q quotes the file", msg)
			}
		})
	}
}

// credentialRecorder serves the fake, remembers every credential it sees and,
// for paths containing leak, answers status with a message quoting the
// Authorization header.
type credentialRecorder struct {
	gh     http.Handler
	leak   string
	status int

	mu    sync.Mutex
	seen  map[string]bool
	leaks int
}

func (c *credentialRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	c.mu.Lock()
	if _, cred, ok := strings.Cut(auth, " "); ok {
		c.seen[cred] = true
	}
	leak := strings.Contains(r.URL.Path, c.leak)
	if leak {
		c.leaks++
	}
	c.mu.Unlock()
	if leak {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": fmt.Sprintf("rejected credentials %q", auth)})
		return
	}
	c.gh.ServeHTTP(w, r)
}

// TestAppCredentialsNeverLeak checks that neither the app JWT nor an
// installation token appears in an error or the log, even when GitHub's
// answer quotes them, and that a failed exchange is not an unknown dispatch
// outcome.
func TestAppCredentialsNeverLeak(t *testing.T) {
	f := appFixture(t)
	keyFile := writeKey(t, testAppKey(), true)
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		leak   string
		status int
	}{{"/access_tokens", 401}, {"/access_tokens", 500}, {"/dispatches", 500}, {"/dispatches", 401}} {
		t.Run(fmt.Sprintf("%s %d", c.leak, c.status), func(t *testing.T) {
			rec := &credentialRecorder{gh: f.gh, leak: c.leak, status: c.status, seen: map[string]bool{}}
			srv := httptest.NewServer(rec)
			t.Cleanup(srv.Close)
			a := f.adapter(func(b *BackendConfig, tools map[string]JobConfig) {
				withApp(keyFile)(b, tools)
				b.APIURL = srv.URL + "/"
			})
			_, err := a.Start(t.Context(), adapters.StartRequest{Tool: "scripted", Arguments: map[string]any{"script": "long"}, CorrelationID: "corr-leak"})
			if err == nil || rec.leaks == 0 {
				t.Fatalf("Start: %v after %d leaky answers, want an error", err, rec.leaks)
			}
			if strings.Contains(c.leak, "access_tokens") && errors.Is(err, adapters.ErrOutcomeUnknown) {
				t.Errorf("a failed token exchange is an unknown dispatch outcome: %v", err)
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("Start: %v, want the server's message with the credential redacted", err)
			}
			texts := []string{err.Error(), f.logText()}
			if len(rec.seen) == 0 {
				t.Fatal("no credentials were sent")
			}
			for _, s := range texts {
				for cred := range rec.seen {
					if strings.Contains(s, cred) {
						t.Errorf("a credential leaked: %s", s)
					}
				}
				if strings.Contains(s, string(keyPEM[40:80])) {
					t.Errorf("the private key leaked: %s", s)
				}
			}
		})
	}
}
