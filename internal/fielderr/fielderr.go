// Package fielderr provides the error a config block's Validate method
// returns for a problem in one of its fields, so that the catalog loader can
// report it at the field's line and column, and inside the field's value when
// the problem is at a known byte of it (an expression's syntax error, say).
//
// It is a leaf: config blocks of adapters, of auth and of the catalog itself
// use it without importing one another.
package fielderr

import "fmt"

// Error is a problem in one field of a config block.
type Error struct {
	// Path is the dotted YAML path of the field relative to the validated
	// block, for example "status.states" or "start.method"; empty for the
	// block as a whole.
	Path string
	// Offset is the 1-based byte position of the problem inside the field's
	// scalar value (as decoded, after YAML quoting and folding), or 0 when
	// the problem is with the value as a whole.
	Offset int
	Err    error
}

// Error formats the problem as "path: message".
func (e *Error) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error for the field at path with a formatted message
// (fmt.Errorf's, so %w wraps).
func Errorf(path, format string, args ...any) error {
	return &Error{Path: path, Err: fmt.Errorf(format, args...)}
}

// New returns an *Error for the problem err at byte offset (1-based, 0: the
// value as a whole) of the value of the field at path.
func New(path string, offset int, err error) error {
	return &Error{Path: path, Offset: offset, Err: err}
}
