package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
)

func TestEgressCheck(t *testing.T) {
	tests := []struct {
		addr  string
		allow []string
		want  bool // allowed
	}{
		// Denied by default.
		{addr: "127.0.0.1"},
		{addr: "127.255.255.254"},
		{addr: "0.0.0.0"},
		{addr: "10.1.2.3"},
		{addr: "172.16.0.1"},
		{addr: "172.31.255.255"},
		{addr: "192.168.1.1"},
		{addr: "169.254.169.254"},
		{addr: "100.64.0.1"},
		{addr: "100.127.255.255"},
		{addr: "192.0.0.8"},
		{addr: "198.18.0.1"},
		{addr: "224.0.0.1"},
		{addr: "255.255.255.255"},
		{addr: "::"},
		{addr: "::1"},
		{addr: "::ffff:127.0.0.1"},
		{addr: "::ffff:169.254.169.254"},
		{addr: "::ffff:10.0.0.1"},
		{addr: "::127.0.0.1"},
		{addr: "fc00::1"},
		{addr: "fd12:3456::1"},
		{addr: "fe80::1"},
		{addr: "fe80::1%eth0"},
		{addr: "fec0::1"},
		{addr: "ff02::1"},
		{addr: "2001:db8::1"},
		{addr: "2001::1"},
		{addr: "64:ff9b::7f00:1"},    // NAT64 of 127.0.0.1
		{addr: "64:ff9b::a9fe:a9fe"}, // NAT64 of 169.254.169.254
		{addr: "2002:7f00:1::1"},     // 6to4 of 127.0.0.1
		{addr: "2002:a9fe:a9fe::1"},  // 6to4 of 169.254.169.254
		{addr: "64:ff9b:1::a00:1"},   // local-use NAT64
		{addr: "::1", allow: []string{"127.0.0.0/8"}},
		{addr: "10.0.0.1", allow: []string{"127.0.0.0/8"}},
		{addr: "10.0.0.1", allow: []string{"10.1.0.0/16"}},
		// Public addresses, and allowed networks.
		{addr: "11.0.0.1", want: true},
		{addr: "100.128.0.1", want: true},
		{addr: "172.32.0.1", want: true},
		{addr: "192.169.0.1", want: true},
		{addr: "2600::1", want: true},
		{addr: "64:ff9b::b00:1", want: true}, // NAT64 of 11.0.0.1
		{addr: "2002:b00:1::1", want: true},  // 6to4 of 11.0.0.1
		{addr: "127.0.0.1", allow: []string{"127.0.0.0/8"}, want: true},
		{addr: "::ffff:127.0.0.1", allow: []string{"127.0.0.0/8"}, want: true},
		{addr: "10.20.30.40", allow: []string{"10.20.0.0/16"}, want: true},
		{addr: "fd00::5", allow: []string{"fd00::/8"}, want: true},
		{addr: "2002:7f00:1::1", allow: []string{"127.0.0.0/8"}, want: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s allow %v", tt.addr, tt.allow), func(t *testing.T) {
			e := newEgress(parseNetworks(tt.allow), nil)
			err := e.check(netip.MustParseAddr(tt.addr))
			if got := err == nil; got != tt.want {
				t.Errorf("check(%s) = %v, want allowed %v", tt.addr, err, tt.want)
			}
			if err != nil && !errors.Is(err, ErrAddressDenied) {
				t.Errorf("check(%s) = %v, want an error wrapping ErrAddressDenied", tt.addr, err)
			}
		})
	}
}

// countingListener accepts connections on loopback, counts and closes them.
// It stands for every address an attacker would like the adapter to reach.
type countingListener struct {
	ln      net.Listener
	accepts atomic.Int64
	done    chan struct{}
}

func listenCounting(t *testing.T, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil
	}
	l := &countingListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepts.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-l.done })
	return l
}

func (l *countingListener) port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// fakeResolver answers lookups from a table: per host a list of successive
// answers, the last repeating. It counts lookups; an unknown host is
// NXDOMAIN, so no test ever asks a real DNS server.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
}

func newFakeResolver(answers map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, lookups: map[string]int{}}
	for host, seq := range answers {
		for _, a := range seq {
			var addrs []netip.Addr
			for _, s := range strings.Split(a, ",") {
				addrs = append(addrs, netip.MustParseAddr(s))
			}
			r.answers[host] = append(r.answers[host], addrs)
		}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := min(r.lookups[host], len(seq)-1)
	r.lookups[host]++
	return seq[n], nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// TestSSRFCorpus points the adapter at addresses it must not reach, in every
// spelling, and checks that none of them gets a connection: each is refused
// when the adapter is built (the base_url is invalid, or a literal address in
// a denied range) or when it dials (the resolved address is denied), before
// any TCP connect. A loopback listener stands behind every payload that
// could reach loopback and counts accepted connections.
func TestSSRFCorpus(t *testing.T) {
	target := listenCounting(t, "127.0.0.1:0")
	p := target.port()
	target6 := listenCounting(t, "[::1]:0")
	p6 := p
	if target6 != nil {
		p6 = target6.port()
	}

	type refusal int
	const (
		atNew  refusal = iota + 1 // New refuses the backend
		atDial                    // requests fail with ErrAddressDenied
	)
	tests := []struct {
		name    string
		baseURL string
		want    refusal
	}{
		{"loopback", fmt.Sprintf("http://127.0.0.1:%d/", p), atNew},
		{"loopback elsewhere in 127/8", fmt.Sprintf("http://127.0.0.2:%d/", p), atNew},
		{"short form 127.1", fmt.Sprintf("http://127.1:%d/", p), atNew},
		{"decimal 2130706433", fmt.Sprintf("http://2130706433:%d/", p), atNew},
		{"hex 0x7f000001", fmt.Sprintf("http://0x7f000001:%d/", p), atNew},
		{"octal 0177.0.0.1", fmt.Sprintf("http://0177.0.0.1:%d/", p), atNew},
		{"dotted hex 0x7f.0.0.1", fmt.Sprintf("http://0x7f.0.0.1:%d/", p), atNew},
		{"IPv6 loopback", fmt.Sprintf("http://[::1]:%d/", p6), atNew},
		{"IPv4-mapped loopback", fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", p), atNew},
		{"IPv4-mapped hex", fmt.Sprintf("http://[::ffff:7f00:1]:%d/", p), atNew},
		{"unspecified", fmt.Sprintf("http://0.0.0.0:%d/", p), atNew},
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", atNew},
		{"cloud metadata IPv6", "http://[fd00:ec2::254]/latest/meta-data/", atNew},
		{"private", "http://10.0.0.1/", atNew},
		{"CGNAT", "http://100.64.0.1/", atNew},
		{"link-local IPv6 with zone", "http://[fe80::1%25lo]/", atNew},
		{"file scheme", "file:///etc/passwd", atNew},
		{"gopher scheme", fmt.Sprintf("gopher://127.0.0.1:%d/", p), atNew},
		{"user-info trick", fmt.Sprintf("http://allowed.test@127.0.0.1:%d/", p), atNew},
		{"user-info trick with port", fmt.Sprintf("http://allowed.test:443@127.0.0.1:%d/", p), atNew},
		{"localhost", fmt.Sprintf("http://localhost:%d/", p), atDial},
		{"name resolving to loopback", fmt.Sprintf("http://loopback.test:%d/", p), atDial},
		{"DNS rebinding", fmt.Sprintf("http://rebind.test:%d/", p), atDial},
		{"name with mixed answers", fmt.Sprintf("http://mixed.test:%d/", p), atDial},
		{"name resolving to metadata", fmt.Sprintf("http://metadata.test:%d/", p), atDial},
		{"name resolving to NAT64 loopback", fmt.Sprintf("http://nat64.test:%d/", p), atDial},
		{"name resolving to IPv4-mapped loopback", fmt.Sprintf("http://mapped.test:%d/", p), atDial},
	}
	resolver := newFakeResolver(map[string][]string{
		"localhost":     {"127.0.0.1,::1"},
		"loopback.test": {"127.0.0.1"},
		// First answer public (what a check at validation time would see),
		// then loopback (what the connection would reach).
		"rebind.test":   {"11.0.0.1", "127.0.0.1"},
		"mixed.test":    {"127.0.0.1,10.0.0.1,::1"},
		"metadata.test": {"169.254.169.254"},
		"nat64.test":    {"64:ff9b::7f00:1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
	})
	// A validating proxy would have resolved the rebinding name first.
	if addrs, _ := resolver.LookupNetIP(t.Context(), "ip", "rebind.test"); addrs[0] != netip.MustParseAddr("11.0.0.1") {
		t.Fatalf("rebinding resolver's first answer = %v", addrs)
	}

	refusedAtNew, refusedAtDial := 0, 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New("evil", BackendConfig{BaseURL: tt.baseURL}, map[string]JobConfig{"deploy": testJob()}, &Options{
				Resolver: resolver, Getenv: testEnv, RetryWaitMin: 1, RetryWaitMax: 1,
			})
			if tt.want == atNew {
				if err == nil {
					t.Fatalf("New(%s) succeeded, want a refusal", tt.baseURL)
				}
				refusedAtNew++
				return
			}
			if err != nil {
				t.Fatalf("New(%s): %v", tt.baseURL, err)
			}
			ctx := t.Context()
			req := startReq(map[string]any{"project": "p"})
			_, startErr := a.Start(ctx, req)
			obs, _ := a.Poll(ctx, []adapters.JobRef{testRef("1")})
			cancelErr := a.Cancel(ctx, testRef("1"))
			_, _, findErr := a.Find(ctx, req)
			for _, err := range []error{startErr, obs[0].Err, cancelErr, findErr} {
				if !errors.Is(err, ErrAddressDenied) {
					t.Errorf("error = %v, want one wrapping ErrAddressDenied", err)
				}
			}
			if errors.Is(startErr, adapters.ErrOutcomeUnknown) {
				t.Errorf("Start error %v says the outcome is unknown; nothing was sent", startErr)
			}
			refusedAtDial++
		})
	}
	got := map[string]int64{"127.0.0.1 accepts": target.accepts.Load()}
	if target6 != nil {
		got["[::1] accepts"] = target6.accepts.Load()
	}
	want := map[string]int64{"127.0.0.1 accepts": 0}
	if target6 != nil {
		want["[::1] accepts"] = 0
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connections reached the target (-want +got):\n%s", diff)
	}
	// Names are resolved through the injected resolver at each connect (4
	// calls, none retried), so the rebinding name's loopback answer is the
	// one checked; numeric host spellings are never resolved.
	for _, host := range []string{"localhost", "loopback.test", "mixed.test", "metadata.test", "nat64.test", "mapped.test"} {
		if n := resolver.count(host); n != 4 {
			t.Errorf("%s was looked up %d times, want 4 (one per call)", host, n)
		}
	}
	if n := resolver.count("rebind.test"); n != 5 {
		t.Errorf("rebind.test was looked up %d times, want 5 (the check's, then one per call)", n)
	}
	for _, host := range []string{"127.1", "2130706433", "0x7f000001", "0x7f.0.0.1"} {
		if n := resolver.count(host); n != 0 {
			t.Errorf("%s was looked up %d times, want 0", host, n)
		}
	}
	t.Logf("SSRF corpus: %d base URLs, %d refused when the adapter is built, %d at connect time, %d connections",
		len(tests), refusedAtNew, refusedAtDial, target.accepts.Load())
}

// TestAllowNetworksReachesBackend is the corpus' control: the same resolver
// path connects when allow_networks lists the network, so the refusals above
// are the egress check's doing.
func TestAllowNetworksReachesBackend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"job-1"}`)
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	resolver := newFakeResolver(map[string][]string{"jobs.test": {"127.0.0.1"}})
	for _, tt := range []struct {
		allow []string
		want  bool
	}{
		{allow: nil, want: false},
		{allow: []string{"10.0.0.0/8"}, want: false},
		{allow: []string{"127.0.0.0/8"}, want: true},
		{allow: []string{"127.0.0.1/32"}, want: true},
	} {
		t.Run(fmt.Sprint(tt.allow), func(t *testing.T) {
			backend := BackendConfig{BaseURL: fmt.Sprintf("http://jobs.test:%d/api/v1", port), AllowNetworks: tt.allow}
			job := testJob()
			job.Start.Path = "/jobs"
			a, err := New("jobs", backend, map[string]JobConfig{"deploy": job}, &Options{Resolver: resolver})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := a.Start(t.Context(), startReq(map[string]any{"project": "p"}))
			if got := err == nil; got != tt.want {
				t.Fatalf("Start = %v, %v; want success %v", ref, err, tt.want)
			}
			if !tt.want && !errors.Is(err, ErrAddressDenied) {
				t.Errorf("Start error = %v, want one wrapping ErrAddressDenied", err)
			}
		})
	}
}

// TestNoRedirectsOrForeignLocations checks that an allowed backend cannot
// send the adapter elsewhere: redirects are not followed (not even to its
// own address on another port) and an absolute Location on another origin
// is refused as soon as the start answer is read.
func TestNoRedirectsOrForeignLocations(t *testing.T) {
	target := listenCounting(t, "127.0.0.1:0")
	elsewhere := fmt.Sprintf("http://127.0.0.1:%d/jobs/1", target.port())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/redirect/jobs":
			http.Redirect(w, r, elsewhere, http.StatusTemporaryRedirect)
		case r.Method == http.MethodPost:
			w.Header().Set("Location", elsewhere)
			w.WriteHeader(http.StatusCreated)
		default:
			http.Redirect(w, r, elsewhere, http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	backend := BackendConfig{BaseURL: srv.URL + "/api/v1", AllowNetworks: []string{"127.0.0.1/32"}}

	job := testJob()
	job.Start.Path = "/{args.mode}/jobs"
	job.JobID = JobIDConfig{FromLocation: true}
	job.Status.Path = "{job.location}"
	job.Find = nil
	a, err := New("jobs", backend, map[string]JobConfig{"deploy": job}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Start(t.Context(), startReq(map[string]any{"mode": "redirect"})); err == nil {
		t.Error("Start answered by a 307 succeeded, want an error")
	}
	if _, err := a.Start(t.Context(), startReq(map[string]any{"mode": "located"})); !errors.Is(err, adapters.ErrJobUnaddressable) {
		t.Errorf("Start answered with a Location on another origin = %v, want an error wrapping ErrJobUnaddressable", err)
	}

	// A status call answered by a redirect is an error, not followed.
	plain := testJob()
	plain.Find = nil
	b, err := New("jobs", backend, map[string]JobConfig{"deploy": plain}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs, _ := b.Poll(t.Context(), []adapters.JobRef{testRef("1")})
	if obs[0].Err == nil {
		t.Errorf("Poll answered by a 302 observed %v, want an error", obs[0].State)
	}
	if n := target.accepts.Load(); n != 0 {
		t.Errorf("%d connections reached the redirect target, want 0", n)
	}
}

// TestArgumentsCannotSteer sends hostile argument values through a real
// loopback backend: each lands in exactly one escaped path segment, query
// value or header, or the request is refused before it is sent.
func TestArgumentsCannotSteer(t *testing.T) {
	type seen struct {
		Host, Path, Query, Header string
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{Host: r.Host, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Get("X-Env")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"job-1"}`)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	backend := BackendConfig{BaseURL: srv.URL + "/api/v1", AllowNetworks: []string{"127.0.0.1/32"}}
	job := testJob()
	job.Start.Query = map[string]string{"env": "{args.env}"}
	job.Start.Headers = map[string]string{"X-Env": "{args.env}"}
	a, err := New("jobs", backend, map[string]JobConfig{"deploy": job}, nil)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		value string
		want  *seen // nil: refused before sending
	}{
		{"../admin", &seen{Path: "/api/v1/projects/..%2Fadmin/jobs", Query: "env=..%2Fadmin", Header: "../admin"}},
		{"%2e%2e/", &seen{Path: "/api/v1/projects/%252e%252e%2F/jobs", Query: "env=%252e%252e%2F", Header: "%2e%2e/"}},
		{"%2F", &seen{Path: "/api/v1/projects/%252F/jobs", Query: "env=%252F", Header: "%2F"}},
		{"a?b=c", &seen{Path: "/api/v1/projects/a%3Fb=c/jobs", Query: "env=a%3Fb%3Dc", Header: "a?b=c"}},
		{"a#frag", &seen{Path: "/api/v1/projects/a%23frag/jobs", Query: "env=a%23frag", Header: "a#frag"}},
		{"@127.0.0.1:1", &seen{Path: "/api/v1/projects/@127.0.0.1:1/jobs", Query: "env=%40127.0.0.1%3A1", Header: "@127.0.0.1:1"}},
		{"//127.0.0.1:1/x", &seen{Path: "/api/v1/projects/%2F%2F127.0.0.1:1%2Fx/jobs", Query: "env=%2F%2F127.0.0.1%3A1%2Fx", Header: "//127.0.0.1:1/x"}},
		{"x\r\nHost: 127.0.0.1:1", nil},
		{"x\nX-Injected: 1", nil},
		{"..", nil},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			_, err := a.Start(t.Context(), startReq(map[string]any{"project": tt.value, "env": tt.value}))
			mu.Lock()
			defer mu.Unlock()
			if tt.want == nil {
				if err == nil || len(got) != 0 {
					t.Errorf("Start = %v with %d requests sent, want a refusal and none", err, len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			want := *tt.want
			want.Host = host
			if diff := cmp.Diff([]seen{want}, got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkEgressCheck measures the connect-time check of one address
// against the deny list and an allow list.
func BenchmarkEgressCheck(b *testing.B) {
	e := newEgress(parseNetworks([]string{"10.20.0.0/16", "fd00::/8"}), nil)
	addrs := []netip.Addr{
		netip.MustParseAddr("11.0.0.1"), netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("::ffff:169.254.169.254"), netip.MustParseAddr("2600::1"),
	}
	for b.Loop() {
		for _, a := range addrs {
			e.check(a)
		}
	}
}
