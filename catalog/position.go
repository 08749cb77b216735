package catalog

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// inValue returns the position, in the file, of the byte at offset (1-based)
// of the decoded value of the scalar n: where a problem a config block found
// inside a value (an expression's syntax error, say) is. It reports false
// when the byte cannot be found in the text as written (a value continued
// on another line in flow style, a tagged value, an offset past the value),
// and the caller then points at the value as a whole.
//
// Columns count characters, as the YAML parser's do.
func (l *loader) inValue(n *yaml.Node, offset int) (Position, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || offset < 1 || offset > len(n.Value)+1 {
		return Position{}, false
	}
	start, ok := byteOffset(l.src, n.Line, n.Column)
	if !ok {
		return Position{}, false
	}
	if n.Anchor != "" || n.Style&yaml.TaggedStyle != 0 {
		start = skipProperties(l.src, start)
	}
	var off int
	switch n.Style &^ yaml.TaggedStyle {
	case 0:
		off, ok = inPlain(l.src, start, n.Value, offset-1)
	case yaml.SingleQuotedStyle:
		off, ok = inSingleQuoted(l.src, start, offset-1)
	case yaml.DoubleQuotedStyle:
		off, ok = inDoubleQuoted(l.src, start, offset-1)
	case yaml.LiteralStyle, yaml.FoldedStyle:
		off, ok = inBlock(l.src, start, n.Value, offset-1, n.Style == yaml.FoldedStyle)
	default:
		ok = false
	}
	if !ok {
		return Position{}, false
	}
	line, col := lineColumn(l.src, off)
	return Position{File: l.file, Line: line, Column: col}, true
}

// byteOffset returns the byte offset in src of the 1-based line and column
// (in characters).
func byteOffset(src []byte, line, col int) (int, bool) {
	off := 0
	for range line - 1 {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for range col - 1 {
		if off >= len(src) || src[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(src[off:])
		off += size
	}
	return off, true
}

// skipProperties skips the anchor (&name) and tag (!tag) written before a
// value at start, and the blanks after them.
func skipProperties(src []byte, start int) int {
	for start < len(src) && (src[start] == '&' || src[start] == '!') {
		for start < len(src) && src[start] != ' ' && src[start] != '\t' && src[start] != '\n' {
			start++
		}
		for start < len(src) && (src[start] == ' ' || src[start] == '\t') {
			start++
		}
	}
	return start
}

// inPlain maps byte k of the plain scalar value written at start: exact when
// the value is written on one line, as it then is byte for byte.
func inPlain(src []byte, start int, value string, k int) (int, bool) {
	if !bytes.HasPrefix(src[start:], []byte(value)) {
		return 0, false
	}
	return start + k, true
}

// inSingleQuoted maps byte k of the single-quoted scalar whose opening quote
// is at start (two quotes in a row stand for one), on the quote's line.
func inSingleQuoted(src []byte, start, k int) (int, bool) {
	if start >= len(src) || src[start] != '\'' {
		return 0, false
	}
	i := start + 1
	for ; k > 0; k-- {
		switch {
		case i >= len(src) || src[i] == '\n':
			return 0, false
		case src[i] == '\'':
			if i+1 >= len(src) || src[i+1] != '\'' {
				return 0, false // the closing quote, before byte k
			}
			i += 2
		default:
			i++
		}
	}
	return i, true
}

// inDoubleQuoted maps byte k of the double-quoted scalar whose opening quote
// is at start, on the quote's line. An escape counts as the bytes it decodes
// to (\x, \u and \U as the UTF-8 encoding of their code point, \N and \_ as
// two, \L and \P as three, others as one); a byte inside a multi-byte escape
// maps to its backslash. This follows YAML's escapes closely but is an
// approximation: a value continued on the next line is not followed.
func inDoubleQuoted(src []byte, start, k int) (int, bool) {
	if start >= len(src) || src[start] != '"' {
		return 0, false
	}
	i := start + 1
	for k > 0 {
		if i >= len(src) || src[i] == '\n' || src[i] == '"' {
			return 0, false
		}
		if src[i] != '\\' {
			i++
			k--
			continue
		}
		if i+1 >= len(src) || src[i+1] == '\n' {
			return 0, false
		}
		width, decoded := 2, 1
		switch src[i+1] {
		case 'x', 'u', 'U':
			width = 4
			if src[i+1] == 'u' {
				width = 6
			} else if src[i+1] == 'U' {
				width = 10
			}
			if i+width <= len(src) {
				if r, ok := hexRune(src[i+2 : i+width]); ok && utf8.ValidRune(r) {
					decoded = utf8.RuneLen(r)
				}
			}
		case 'N', '_':
			decoded = 2
		case 'L', 'P':
			decoded = 3
		}
		if k < decoded {
			return i, true
		}
		i += width
		k -= decoded
	}
	return i, true
}

func hexRune(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// inBlock maps byte k of the literal (|) or folded (>) block scalar value
// whose indicator is at start. It walks the content lines that follow the
// header, matching each against the value: a literal value keeps every line
// break; a folded one turns the break between two lines that are not more
// indented into a space, or into one newline per empty line between them. A
// byte in a line break maps to the end of the line before it. The content's
// indentation is that of its first non-empty line, or, with an explicit
// indentation indicator, the header line's plus the indicator (an
// approximation for a header in a sequence entry).
func inBlock(src []byte, start int, value string, k int, folded bool) (int, bool) {
	headerEnd := bytes.IndexByte(src[start:], '\n')
	if headerEnd < 0 {
		return 0, false
	}
	header := src[start : start+headerEnd]
	lineStart := bytes.LastIndexByte(src[:start], '\n') + 1
	indent := 0
	for _, c := range header[1:] {
		if c >= '1' && c <= '9' {
			indent = len(src[lineStart:start]) - len(bytes.TrimLeft(src[lineStart:start], " ")) + int(c-'0')
		}
	}

	type line struct {
		at   int // byte offset of the line in src
		text string
	}
	var lines []line
	for at := start + headerEnd + 1; at < len(src); {
		end := bytes.IndexByte(src[at:], '\n')
		if end < 0 {
			end = len(src) - at
		}
		text := string(src[at : at+end])
		lines = append(lines, line{at, text})
		at += end + 1
	}
	if indent == 0 {
		for _, ln := range lines {
			if strings.TrimLeft(ln.text, " ") != "" {
				indent = len(ln.text) - len(strings.TrimLeft(ln.text, " "))
				break
			}
		}
	}
	if indent == 0 {
		return 0, false
	}

	const (
		none = iota
		normal
		more
	)
	v, prev, prevEnd, empty := 0, none, 0, 0
	for _, ln := range lines {
		if len(ln.text) <= indent && strings.TrimLeft(ln.text, " ") == "" {
			empty++
			continue
		}
		if len(ln.text) < indent || strings.TrimLeft(ln.text[:indent], " ") != "" {
			break // less indented: the block has ended
		}
		content := ln.text[indent:]
		kind := normal
		if content[0] == ' ' || content[0] == '\t' {
			kind = more
		}
		sep := empty + 1
		switch {
		case prev == none:
			sep = empty
		case folded && prev == normal && kind == normal && empty > 0:
			sep = empty
		}
		if k < v+sep {
			return prevEnd, prev != none
		}
		v += sep
		if v > len(value) || !strings.HasPrefix(value[v:], content) {
			return 0, false
		}
		if k < v+len(content) {
			return ln.at + indent + (k - v), true
		}
		v += len(content)
		prev, prevEnd, empty = kind, ln.at+indent+len(content), 0
	}
	return prevEnd, prev != none
}
