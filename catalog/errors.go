package catalog

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a catalog file.
type Error struct {
	// Pos is where the problem is. Line and Column are zero when the YAML
	// parser could not tell.
	Pos Position
	// Path is the YAML path of the offending key or value, for example
	// "tools[2].job.status.states.RUNNING" or "backends.jobs.base_url"; it is
	// empty for problems with the file as a whole.
	Path string
	Err  error
}

// Error formats the problem as "file:line:col: path: message".
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Pos.String() + ": " + e.Err.Error()
	}
	return e.Pos.String() + ": " + e.Path + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found in a catalog file, in file order. [Load] and
// [Parse] return it (as an error) when the catalog is not valid.
type Errors []*Error

// Error returns one line per problem.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sort puts the problems in file order, keeping the order in which they were
// found among problems at the same place.
func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Column, b.Pos.Column))
	})
}

// String formats the position as "file:line:col", leaving out a line or
// column that is not known (zero).
func (p Position) String() string {
	s := p.File
	if p.Line > 0 {
		s += ":" + strconv.Itoa(p.Line)
		if p.Column > 0 {
			s += ":" + strconv.Itoa(p.Column)
		}
	}
	return s
}
