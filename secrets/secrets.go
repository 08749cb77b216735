// Package secrets resolves the secret references of a backend's
// configuration, ${NAME} (an environment variable) and ${file:/path} (a
// file), keeps a rotated file's new value in force without a restart, and
// redacts every value it has handed out from the text that leaves the
// process (errors, logs, observations).
//
// It is the one implementation of these rules; every adapter resolves its
// secrets through a [Source] and cleans backend text with the [Redactor]
// the source registers the values with:
//
//   - An environment variable is read once, on first use (which is at
//     start, when the adapter checks its references), and kept.
//   - A file is read whole: one line, its trailing newline trimmed, at most
//     64 KiB. It is read again whenever its modification time or size
//     changes, and after [Source.Refresh] (a backend that answered 401).
//     When a file that was read before becomes unreadable or invalid, the
//     last good value stays in force, with a warning, until the file is
//     good again: a rotation that swaps files is not an outage.
//   - Every value is registered with the redactor; of a file the last few
//     values stay redacted, so that an old secret still quoted by a backend
//     is removed too.
//
// Errors name the variable or the file and what is wrong, never a value.
package secrets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// MaxFileSize bounds a secret file's size.
const MaxFileSize = 64 << 10

// Ref is a secret reference: Env names an environment variable, or File is
// the absolute path of a file (expr.SecretRef is this type).
type Ref struct {
	Env  string
	File string
}

func (r Ref) String() string {
	if r.File != "" {
		return "${file:" + r.File + "}"
	}
	return "${" + r.Env + "}"
}

// Options configure a [Source]. The zero value is ready to use.
type Options struct {
	// Getenv reads environment variables. Default: os.LookupEnv.
	Getenv func(string) (string, bool)
	// Redactor is told every value the source returns. Default: a new one
	// ([Source.Redactor] returns it).
	Redactor *Redactor
	// Check, when set, checks every value before it is returned (a key's
	// length, say); its error completes "environment variable X ..." or
	// "secret file X ..." and must not quote the value.
	Check func(value string) error
	// Logger receives the warning that a rotated file cannot be read and
	// the last good value stays in force. Default: none.
	Logger *slog.Logger
}

// Source resolves secret references. It is safe for concurrent use.
type Source struct {
	getenv func(string) (string, bool)
	red    *Redactor
	check  func(string) error
	log    *slog.Logger

	mu    sync.Mutex
	env   map[string]envValue
	files map[string]*file
}

type envValue struct {
	v  string
	ok bool
}

// file is what a source knows of one secret file.
type file struct {
	mu    sync.Mutex
	value string // the last good value; "" before the first good read
	mod   time.Time
	size  int64
	stale bool // read again at the next use, whatever its time and size
}

// NewSource returns a source with the options o (nil for the defaults).
func NewSource(o *Options) *Source {
	if o == nil {
		o = &Options{}
	}
	s := &Source{getenv: o.Getenv, red: o.Redactor, check: o.Check, log: o.Logger,
		env: map[string]envValue{}, files: map[string]*file{}}
	if s.getenv == nil {
		s.getenv = os.LookupEnv
	}
	if s.red == nil {
		s.red = &Redactor{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Redactor returns the redactor the source registers values with.
func (s *Source) Redactor() *Redactor { return s.red }

// Value returns the current value of ref.
func (s *Source) Value(ref Ref) (string, error) {
	if ref.File != "" {
		return s.File(ref.File)
	}
	return s.Env(ref.Env)
}

// Env returns the value of the environment variable name, read on first
// use and kept. An unset variable, or a value with a line break or NUL, is
// an error.
func (s *Source) Env(name string) (string, error) {
	s.mu.Lock()
	e, seen := s.env[name]
	if !seen {
		e.v, e.ok = s.getenv(name)
		s.env[name] = e
	}
	s.mu.Unlock()
	if !e.ok {
		return "", fmt.Errorf("environment variable %s is not set", name)
	}
	if err := s.checkValue(e.v); err != nil {
		return "", fmt.Errorf("environment variable %s %w", name, err)
	}
	s.red.Add(e.v)
	return e.v, nil
}

// File returns the value of the secret file at path: read again when its
// modification time or size has changed since the last read, or after
// Refresh. When it was read before and now cannot be read or is invalid,
// the last good value is returned and a warning logged, once per change of
// the file.
func (s *Source) File(path string) (string, error) {
	s.mu.Lock()
	f := s.files[path]
	if f == nil {
		f = &file{}
		s.files[path] = f
	}
	s.mu.Unlock()

	f.mu.Lock()
	defer f.mu.Unlock()
	fi, statErr := os.Stat(path)
	if statErr == nil && f.value != "" && !f.stale && fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return f.value, nil
	}
	v, mod, size, err := s.readFile(path)
	if err != nil {
		if f.value == "" {
			return "", err
		}
		s.log.Warn("cannot read the rotated secret file; keeping the last value read", "file", path, "error", err)
		// Do not read it again on every use until it changes.
		f.stale = false
		if statErr == nil {
			f.mod, f.size = fi.ModTime(), fi.Size()
		}
		return f.value, nil
	}
	s.red.AddFrom("file:"+path, v)
	f.value, f.mod, f.size, f.stale = v, mod, size, false
	return v, nil
}

// readFile reads a secret file whole: one line, its trailing newline
// trimmed.
func (s *Source) readFile(path string) (v string, mod time.Time, size int64, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", time.Time{}, 0, fileErr(path, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", time.Time{}, 0, fileErr(path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", time.Time{}, 0, fmt.Errorf("secret file %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return "", time.Time{}, 0, fileErr(path, err)
	}
	if len(b) > MaxFileSize {
		return "", time.Time{}, 0, fmt.Errorf("secret file %s is larger than %d KiB", path, MaxFileSize>>10)
	}
	v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", time.Time{}, 0, fmt.Errorf("secret file %s is empty", path)
	}
	if err := s.checkValue(v); err != nil {
		return "", time.Time{}, 0, fmt.Errorf("secret file %s %w", path, err)
	}
	return v, fi.ModTime(), fi.Size(), nil
}

// checkValue refuses a value that cannot travel in a header, then applies
// the source's own check.
func (s *Source) checkValue(v string) error {
	if strings.ContainsAny(v, "\r\n\x00") {
		return errors.New("contains a line break or NUL")
	}
	if s.check != nil {
		return s.check(v)
	}
	return nil
}

// fileErr describes an error opening or reading a secret file by its path
// and the system's reason ("no such file or directory"), wrapping the
// reason so that errors.Is(err, fs.ErrNotExist) works.
func fileErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("secret file %s: %w", path, err)
}

// Refresh makes the next use of every file read it again (after a backend
// answered 401: the file may have been rotated within the same second and
// size). Environment variables are read once and stay.
func (s *Source) Refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.mu.Lock()
		f.stale = true
		f.mu.Unlock()
	}
}

// UsesFiles reports whether the source has been asked for a file, so that
// a Refresh may change what it returns.
func (s *Source) UsesFiles() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files) > 0
}
