package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// YAML syntax errors. yaml.v3 reports a syntax error with the line where
// the enclosing construct began (and, for most errors, that line counted from
// zero), never with a column. The position a reader needs is that of the
// first character that makes the text invalid; it is found here by parsing
// prefixes of the file: the shortest prefix that fails with the very same
// error ends at that character. Only a file that does not parse pays for it,
// with a few dozen parses (a binary search over lines, then over the bytes
// of one line).

// maxLocateBytes bounds the files whose syntax errors are located; a larger
// one is reported at the line the parser gives.
const maxLocateBytes = 4 << 20

var (
	yamlLineRE   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	yamlAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// syntaxError reports a YAML parser error err, found in data, at the line
// and column of the offending character, with a hint where the parser's
// words are obscure.
func (l *loader) syntaxError(data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	parserLine := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		parserLine, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	pos := Position{File: l.file}
	if off, ok := locateYAMLError(data, err, nil); ok {
		off = adjustYAMLError(data, err, off, msg)
		pos.Line, pos.Column = lineColumn(data, off)
		if hint := yamlHint(data, off, msg); hint != "" {
			msg += ": " + hint
		}
	} else {
		pos.Line = parserLine
	}
	l.errorAt(pos, "", fmt.Errorf("invalid YAML: %s", msg))
}

// firstYAMLError returns the error yaml.v3 reports for data, reading at most
// two documents as [loader.parse] does.
func firstYAMLError(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for range 2 {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return nil
}

// locateYAMLError returns the byte offset in data of the character at which
// the syntax error err appears: the last byte of the shortest prefix of data
// that fails with the same error. complete, when set, turns a prefix into
// the text that is parsed instead.
func locateYAMLError(data []byte, err error, complete func([]byte) []byte) (int, bool) {
	if len(data) > maxLocateBytes {
		return 0, false
	}
	want := err.Error()
	fails := func(n int) bool {
		prefix := data[:n]
		if complete != nil {
			prefix = complete(prefix)
		}
		e := firstYAMLError(prefix)
		return e != nil && e.Error() == want
	}
	if !fails(len(data)) {
		return 0, false
	}
	// Line starts; lineEnd(k) is the end of the first k+1 lines.
	starts := []int{0}
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	lineEnd := func(k int) int {
		if k+1 >= len(starts) {
			return len(data)
		}
		return starts[k+1]
	}
	k := sort.Search(len(starts), func(k int) bool { return fails(lineEnd(k)) })
	if k == len(starts) {
		return 0, false
	}
	start := starts[k]
	text := bytes.TrimRight(data[start:lineEnd(k)], "\r\n")
	c := sort.Search(len(text)+1, func(c int) bool { return c > 0 && fails(start+c) })
	if c > len(text) {
		// The error needs the line's end: point just past its text.
		return start + len(text), true
	}
	return start + c - 1, true
}

// adjustYAMLError moves the offset found for an unknown anchor, which is the
// alias's last character, to the alias's '*', and the offset found for a
// flow collection that is never closed to its opening bracket (the parser
// notices somewhere after it).
func adjustYAMLError(data []byte, err error, off int, msg string) int {
	if strings.Contains(msg, "did not find expected ',' or") {
		o, closed, ok := openFlow(data, off)
		switch {
		case !ok:
			return off
		case !closed:
			return o
		}
		// Any prefix that ends inside the collection fails as the whole
		// file does; closing the prefix's open collections leaves only
		// the prefixes that hold the mistake failing.
		if at, ok := locateYAMLError(data, err, closeFlows); ok {
			return at
		}
		return off
	}
	m := yamlAnchorRE.FindStringSubmatch(msg)
	if m == nil {
		return off
	}
	lineStart := bytes.LastIndexByte(data[:off], '\n') + 1
	if i := bytes.LastIndex(data[lineStart:min(off+1, len(data))], []byte("*"+m[1])); i >= 0 {
		return lineStart + i
	}
	return off
}

// lineColumn returns the 1-based line and column (in characters) of the
// byte offset off in data.
func lineColumn(data []byte, off int) (line, col int) {
	off = min(off, len(data))
	lineStart := bytes.LastIndexByte(data[:off], '\n') + 1
	line = bytes.Count(data[:lineStart], []byte("\n")) + 1
	col = utf8.RuneCount(data[lineStart:off]) + 1
	return line, col
}

// yamlHint explains the parser's message msg for the character at off, or
// returns "".
func yamlHint(data []byte, off int, msg string) string {
	var ch byte
	if off < len(data) {
		ch = data[off]
	}
	switch {
	case ch == '\t' && (strings.Contains(msg, "cannot start any token") || strings.Contains(msg, "tab character")):
		return "a tab; YAML indents with spaces only"
	case strings.Contains(msg, "cannot start any token") && (ch == '`' || ch == '@'):
		return fmt.Sprintf("a plain value cannot start with %q; put the value in quotes", ch)
	case strings.Contains(msg, "unexpected end of stream") && (ch == '"' || ch == '\''):
		return fmt.Sprintf("the string quoted with %c here is never closed", ch)
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "did not find expected '-' indicator"):
		return "check the indentation of this line"
	case strings.Contains(msg, "mapping values are not allowed"):
		return `put a value that contains ": " in quotes, or check the indentation`
	case strings.Contains(msg, "did not find expected ',' or"):
		if _, closer := flowBrackets(data); off < len(data) && closer[off] < 0 {
			if _, opens := closer[off]; opens {
				return fmt.Sprintf("this %c is never closed", data[off])
			}
		}
		if o, _, ok := openFlow(data, off); ok {
			l, c := lineColumn(data, o)
			return fmt.Sprintf("check for a missing comma or bracket in the flow collection opened at line %d, column %d", l, c)
		}
	}
	return ""
}

// flowBrackets matches the brackets of the flow collections ({...} and
// [...]) in data, skipping quoted strings and comments: it returns each
// opening bracket's offset, in order, with the offset of the bracket that
// closes it, or -1 when none does.
func flowBrackets(data []byte) (openers []int, closer map[int]int) {
	closer = map[int]int{}
	var stack []int
	lastSignificant := byte('\n') // the previous non-blank character
	for i := 0; i < len(data); i++ {
		b := data[i]
		switch {
		case b == '"' || b == '\'':
			i = skipQuoted(data, i)
			lastSignificant = b
			continue
		case b == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n'):
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
			continue
		case b == '{' || b == '[':
			// Outside a flow collection a bracket opens one only where a node
			// starts; inside a plain value it is text (path: /jobs/{job.id}).
			if len(stack) > 0 || strings.IndexByte(":,[{-\n", lastSignificant) >= 0 {
				stack = append(stack, i)
				openers = append(openers, i)
				closer[i] = -1
			}
		case (b == '}' || b == ']') && len(stack) > 0:
			closer[stack[len(stack)-1]] = i
			stack = stack[:len(stack)-1]
		}
		if b != ' ' && b != '\t' && b != '\r' {
			lastSignificant = b
		}
	}
	return openers, closer
}

// closeFlows returns prefix followed by the brackets that close the flow
// collections open at its end.
func closeFlows(prefix []byte) []byte {
	openers, closer := flowBrackets(prefix)
	out := slices.Clone(prefix)
	for i := len(openers) - 1; i >= 0; i-- {
		if o := openers[i]; closer[o] < 0 {
			if prefix[o] == '{' {
				out = append(out, '}')
			} else {
				out = append(out, ']')
			}
		}
	}
	return out
}

// openFlow returns the innermost flow collection still open at off: the
// offset of its opening bracket, and whether a bracket closes it at all.
func openFlow(data []byte, off int) (opener int, closed, ok bool) {
	openers, closer := flowBrackets(data)
	for i := len(openers) - 1; i >= 0; i-- {
		o := openers[i]
		if o < off && (closer[o] < 0 || closer[o] >= off) {
			return o, closer[o] >= 0, true
		}
	}
	return 0, false, false
}

// skipQuoted returns the offset of the quote that closes the string opened
// at data[i], or the last offset when it is not closed.
func skipQuoted(data []byte, i int) int {
	q := data[i]
	for j := i + 1; j < len(data); j++ {
		switch {
		case q == '"' && data[j] == '\\':
			j++
		case data[j] == q:
			if q == '\'' && j+1 < len(data) && data[j+1] == '\'' {
				j++ // '' is an escaped quote
				continue
			}
			return j
		}
	}
	return len(data) - 1
}
