package exchanges

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Concurrent appends land as whole lines, one record each, in the
// backend's file of this process.
func TestAppendWritesWholeLines(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			body := strings.Repeat("x", 10_000)
			if err := Append(dir, Exchange{Backend: "github", Method: "GET", Path: fmt.Sprintf("/n/%d", i), ResponseBody: body}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f, err := os.Open(filepath.Join(dir, fmt.Sprintf("github-%d.jsonl", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		var x Exchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("line %q: %v", sc.Text()[:40], err)
		}
		seen[x.Path] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d distinct records, want 50", len(seen))
	}
}

func TestBody(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      []byte
		wantLen int
		wantCut bool
	}{
		{"small", []byte("hello"), 5, false},
		{"at the limit", make([]byte, MaxBody), MaxBody, false},
		{"over", make([]byte, MaxBody+1), MaxBody, true},
		{"over, cut before a character", append(make([]byte, MaxBody-1), []byte("é")...), MaxBody - 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Body(tt.in)
			if len(got) != tt.wantLen || cut != tt.wantCut {
				t.Errorf("Body: %d bytes, cut %v; want %d, %v", len(got), cut, tt.wantLen, tt.wantCut)
			}
		})
	}
}

// Recorded request headers carry no credentials, and keep what the
// spec checks and a reader need: the other headers and, where asked, the
// authentication scheme.
func TestRedactHeaders(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   http.Header
		how  Redaction
		want http.Header
	}{
		{
			name: "github token keeps its scheme",
			in:   http.Header{"Authorization": {"Bearer ghs_secret"}, "Accept": {"application/vnd.github+json"}},
			how:  KeepScheme,
			want: http.Header{"Authorization": {"Bearer [redacted]"}, "Accept": {"application/vnd.github+json"}},
		},
		{
			name: "sigv4 signature dropped",
			in: http.Header{
				"Authorization":        {"AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/batch/aws4_request, Signature=abc"},
				"X-Amz-Security-Token": {"session-secret"},
				"X-Amz-Date":           {"20260101T000000Z"},
			},
			how:  DropAuthorization,
			want: http.Header{"X-Amz-Date": {"20260101T000000Z"}},
		},
		{
			name: "cookie and session token dropped whatever the redaction",
			in:   http.Header{"Cookie": {"session=secret"}, "X-Amz-Security-Token": {"secret"}, "Content-Type": {"application/json"}},
			how:  KeepScheme,
			want: http.Header{"Content-Type": {"application/json"}},
		},
		{
			name: "no headers",
			in:   nil,
			how:  KeepScheme,
			want: http.Header{},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactHeaders(tt.in, tt.how)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RedactHeaders (-want +got):\n%s", diff)
			}
			if got == nil {
				t.Error("RedactHeaders returned nil; records want an object")
			}
		})
	}
}
