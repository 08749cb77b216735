package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeFile writes a secret file with the given modification time.
func writeFile(t *testing.T, path, content string, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func TestEnvIsReadOnceAndRedacted(t *testing.T) {
	reads := 0
	s := NewSource(&Options{Getenv: func(name string) (string, bool) {
		reads++
		switch name {
		case "TOKEN":
			return "env-t0ken-value", true
		case "BROKEN":
			return "two\nlines", true
		}
		return "", false
	}})
	for range 3 {
		if v, err := s.Env("TOKEN"); err != nil || v != "env-t0ken-value" {
			t.Fatalf("Env(TOKEN) = %q, %v", v, err)
		}
	}
	s.Refresh()
	if _, err := s.Value(Ref{Env: "TOKEN"}); err != nil || reads != 1 {
		t.Errorf("the environment was read %d times (%v), want once", reads, err)
	}
	if got := s.Redactor().Redact("Bearer env-t0ken-value"); got != "Bearer [redacted]" {
		t.Errorf("Redact = %q", got)
	}
	for name, want := range map[string]string{
		"UNSET":  "environment variable UNSET is not set",
		"BROKEN": "environment variable BROKEN contains a line break or NUL",
	} {
		if _, err := s.Env(name); err == nil || err.Error() != want {
			t.Errorf("Env(%s) = %v, want %q", name, err, want)
		}
	}
}

// TestFileRotation: a file is read again when its modification time or
// size changes, the old values stay redacted, and Refresh re-reads a file
// rotated within the same second and size.
func TestFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	s := NewSource(nil)
	t0 := time.Now().Add(-time.Hour)
	for i, tc := range []struct{ content, want string }{
		{"first-value\n", "first-value"},
		{"second-value-longer\r\n", "second-value-longer"},
		{"no-newline", "no-newline"},
	} {
		writeFile(t, path, tc.content, t0.Add(time.Duration(i)*time.Second))
		if v, err := s.File(path); err != nil || v != tc.want {
			t.Errorf("file %q: %q, %v; want %q", tc.content, v, err, tc.want)
		}
	}
	if got := s.Redactor().Redact("x no-newline second-value-longer first-value"); strings.Contains(got, "value") || strings.Contains(got, "newline") {
		t.Errorf("file contents not redacted: %q", got)
	}
	// Same size, same modification time: only Refresh sees the change.
	writeFile(t, path, "no-newlinX", t0.Add(2*time.Second))
	if v, _ := s.File(path); v != "no-newline" {
		t.Errorf("before Refresh: %q, want the cached value", v)
	}
	s.Refresh()
	if v, err := s.File(path); err != nil || v != "no-newlinX" {
		t.Errorf("after Refresh: %q, %v; want the new value", v, err)
	}
	if !s.UsesFiles() {
		t.Errorf("UsesFiles() = false after reading a file")
	}
}

// TestFileErrors: a file that cannot be used is an error naming it (and
// wrapping the system's reason), never quoting its content.
func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		want          string
	}{
		{"empty", "", "is empty"},
		{"only a newline", "\n", "is empty"},
		{"NUL inside", "a-secret\x00b-secret", "contains a line break or NUL"},
		{"two lines", "one-secret\ntwo-secret", "contains a line break or NUL"},
		{"too large", strings.Repeat("x", MaxFileSize+1), "is larger than 64 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			writeFile(t, path, tt.content, time.Now())
			v, err := NewSource(nil).File(path)
			if err == nil || !strings.Contains(err.Error(), "secret file "+path+" ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("File = %q, %v; want an error naming the file and saying %q", v, err, tt.want)
			}
			for _, secret := range []string{"a-secret", "b-secret", "one-secret", "two-secret"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error quotes %q: %v", secret, err)
				}
			}
		})
	}
	_, err := NewSource(nil).File(filepath.Join(dir, "absent"))
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "secret file "+filepath.Join(dir, "absent")+": no such file or directory" {
		t.Errorf("missing file: %v, want one sentence naming it that wraps fs.ErrNotExist", err)
	}
	if _, err := NewSource(nil).File(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}

// TestFileKeepsLastGoodValue: a file that was read and then becomes
// unreadable or invalid (a rotation half done) keeps its last good value
// in force, with a warning, until it is good again.
func TestFileKeepsLastGoodValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	var logs bytes.Buffer
	s := NewSource(&Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t0 := time.Now().Add(-time.Hour)
	writeFile(t, path, "good-key-1\n", t0)
	if v, err := s.File(path); err != nil || v != "good-key-1" {
		t.Fatalf("File = %q, %v", v, err)
	}
	writeFile(t, path, "", t0.Add(time.Second))
	if v, err := s.File(path); err != nil || v != "good-key-1" {
		t.Errorf("an emptied file: %q, %v; want the last good value", v, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if v, err := s.File(path); err != nil || v != "good-key-1" {
		t.Errorf("a removed file: %q, %v; want the last good value", v, err)
	}
	if !strings.Contains(logs.String(), "keeping the last value read") || !strings.Contains(logs.String(), path) {
		t.Errorf("no warning naming the file: %q", logs.String())
	}
	if strings.Contains(logs.String(), "good-key-1") {
		t.Errorf("the warning quotes the value: %q", logs.String())
	}
	writeFile(t, path, "good-key-2\n", t0.Add(2*time.Second))
	if v, err := s.File(path); err != nil || v != "good-key-2" {
		t.Errorf("the rotated file: %q, %v; want the new value", v, err)
	}
}

// TestCheck: the source's own check applies to every value, from the
// environment and from files, and its error names where the value came
// from.
func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	writeFile(t, path, "short\n", time.Now())
	s := NewSource(&Options{
		Getenv: func(string) (string, bool) { return "tiny", true },
		Check: func(v string) error {
			if len(v) < 8 {
				return errors.New("holds a key shorter than 8 characters")
			}
			return nil
		},
	})
	if _, err := s.Env("KEY"); err == nil || err.Error() != "environment variable KEY holds a key shorter than 8 characters" {
		t.Errorf("Env = %v", err)
	}
	if _, err := s.File(path); err == nil || err.Error() != "secret file "+path+" holds a key shorter than 8 characters" {
		t.Errorf("File = %v", err)
	}
}

func TestRedactorIsBoundedAndConcurrent(t *testing.T) {
	red := &Redactor{}
	red.Add("fixed-secret-1")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				red.AddFrom(fmt.Sprintf("source-%d", g), fmt.Sprintf("token-%d-%03d", g, i))
				_ = red.Redact("token-0-001 fixed-secret-1")
			}
		})
	}
	wg.Wait()
	if n := len(*red.secrets.Load()); n != 1+4*keepPerSource {
		t.Errorf("the redactor holds %d values, want %d", n, 1+4*keepPerSource)
	}
	got := red.Redact("fixed-secret-1 token-0-099 token-0-096 token-0-095")
	if want := "[redacted] [redacted] [redacted] token-0-095"; got != want {
		t.Errorf("Redact = %q, want %q (the newest values of each source, and fixed ones)", got, want)
	}
	red.AddFrom("s", "abc") // too short to redact
	red.AddFrom("s", "secret-long-value")
	red.AddFrom("s2", "secret-long")
	if got := red.Redact("x secret-long-value y"); got != "x [redacted] y" {
		t.Errorf("a secret containing another: %q", got)
	}
	if got := red.Redact("abc"); got != "abc" {
		t.Errorf("a short value was redacted: %q", got)
	}
}

func TestClean(t *testing.T) {
	red := &Redactor{}
	red.Add("s3cret-value")
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"token s3cret-value\nexpired", 100, "token [redacted] expired"},
		{"a\x00b\tc  d", 100, "a b c d"},
		{strings.Repeat("é", 10), 5, "éé…"},
	}
	for _, tt := range tests {
		if got := red.Clean(tt.in, tt.n); got != tt.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
