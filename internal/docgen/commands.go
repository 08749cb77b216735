package docgen

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Command is one command's help, as the command prints it for -h: the
// synopsis lines ("usage: ..."), the description, the examples and the
// flags.
type Command struct {
	Name string
	// Usage are the synopsis lines without "usage: ".
	Usage []string
	// Description is the text between the synopsis and "Example:", as
	// paragraphs separated by blank lines, each kept as written.
	Description []string
	// Examples are the example command lines.
	Examples []string
	Flags    []Flag
}

// Flag is one flag as the flag package prints it (PrintDefaults).
type Flag struct {
	Name string
	// Arg is the flag's argument name (the back-quoted word of its usage,
	// or its type); empty for a boolean flag.
	Arg string
	// Usage is what the flag does, without its default.
	Usage string
	// Default is the default value as printed, quotes included; empty when
	// the default is the zero value.
	Default string
}

var defaultSuffix = regexp.MustCompile(` \(default (.*)\)$`)

// ParseHelp reads the help text a command prints for -h: "usage:" lines,
// a description, "Example:" with indented command lines, and "Flags:"
// followed by the flag package's PrintDefaults output.
func ParseHelp(name, text string) (Command, error) {
	c := Command{Name: name}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "usage: "):
			c.Usage = append(c.Usage, strings.TrimPrefix(l, "usage: "))
			continue
		case len(c.Usage) > 0 && strings.HasPrefix(l, "       ") && strings.TrimSpace(l) != "":
			c.Usage = append(c.Usage, strings.TrimSpace(l))
			continue
		}
		break
	}
	if len(c.Usage) == 0 {
		return c, fmt.Errorf("%s: help does not start with \"usage: \"", name)
	}
	section := "description"
	var para []string
	flush := func() {
		if len(para) > 0 {
			c.Description = append(c.Description, strings.Join(para, "\n"))
			para = nil
		}
	}
	for ; i < len(lines); i++ {
		l := lines[i]
		switch strings.TrimSpace(l) {
		case "Example:", "Examples:":
			flush()
			section = "example"
			continue
		case "Flags:":
			flush()
			section = "flags"
			continue
		}
		switch section {
		case "description":
			if strings.TrimSpace(l) == "" {
				flush()
			} else {
				para = append(para, l)
			}
		case "example":
			if s := strings.TrimSpace(l); s != "" {
				c.Examples = append(c.Examples, s)
			}
		case "flags":
			switch {
			case strings.HasPrefix(l, "  -"):
				c.Flags = append(c.Flags, parseFlagHeader(l[3:]))
			case strings.HasPrefix(l, "    \t") && len(c.Flags) > 0:
				f := &c.Flags[len(c.Flags)-1]
				f.Usage = strings.TrimSpace(f.Usage + "\n" + strings.TrimPrefix(l, "    \t"))
			case strings.TrimSpace(l) == "":
			default:
				return c, fmt.Errorf("%s: unexpected line among the flags: %q", name, l)
			}
		}
	}
	flush()
	for i := range c.Flags {
		f := &c.Flags[i]
		if m := defaultSuffix.FindStringSubmatch(f.Usage); m != nil {
			f.Default = m[1]
			f.Usage = strings.TrimSuffix(f.Usage, m[0])
		}
	}
	return c, nil
}

// parseFlagHeader reads "name arg", "name" or "x\tusage" (a one-letter
// flag's usage follows on the same line).
func parseFlagHeader(h string) Flag {
	var f Flag
	h, usage, _ := strings.Cut(h, "\t")
	f.Usage = usage
	f.Name, f.Arg, _ = strings.Cut(h, " ")
	return f
}

// RenderCommands writes the command reference: the program's own usage,
// a summary table, and one section per command with its synopsis,
// description, examples and a table of its flags. regenerate is the
// command that rewrites the file, printed in its header.
func RenderCommands(w io.Writer, overview string, cmds []Command, regenerate string) error {
	var b strings.Builder
	b.WriteString("# Command reference\n\n")
	fmt.Fprintf(&b, "<!-- Generated from the commands' own help (`jobbridge COMMAND -h`); do not edit.\n     Regenerate with: %s -->\n\n", regenerate)
	b.WriteString("Every command answers `-h` or `--help` on stdout (exit status 0) with the text below;\n")
	b.WriteString("a usage error exits with status 2. Flags may come before or after the positional arguments,\n")
	b.WriteString("written `-flag` or `--flag`, with their value after a space or `=`.\n\n")
	b.WriteString("```text\n" + strings.TrimRight(overview, "\n") + "\n```\n\n")
	b.WriteString("| command | synopsis |\n|---|---|\n")
	for _, c := range cmds {
		var syn []string
		for _, u := range c.Usage {
			syn = append(syn, code(u))
		}
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.Name, Slug("jobbridge "+c.Name), cell(strings.Join(syn, "<br>")))
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n## jobbridge %s\n\n", c.Name)
		b.WriteString("```text\n" + strings.Join(c.Usage, "\n") + "\n```\n\n")
		for _, p := range c.Description {
			if indented(p) {
				b.WriteString("```text\n" + dedent(p) + "\n```\n\n")
				continue
			}
			b.WriteString(strings.Join(strings.Fields(p), " ") + "\n\n")
		}
		if len(c.Examples) > 0 {
			b.WriteString("Example:\n\n```sh\n" + strings.Join(c.Examples, "\n") + "\n```\n\n")
		}
		if len(c.Flags) == 0 {
			b.WriteString("No flags.\n")
			continue
		}
		b.WriteString("| flag | argument | default | meaning |\n|---|---|---|---|\n")
		for _, f := range c.Flags {
			arg, def := "", ""
			if f.Arg != "" {
				arg = "`" + f.Arg + "`"
			}
			if f.Default != "" {
				def = "`" + f.Default + "`"
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, cell(arg), cell(def), cell(strings.Join(strings.Fields(f.Usage), " ")))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// indented reports whether every line of a paragraph starts with a space:
// a list or a block laid out by hand, kept as written.
func indented(p string) bool {
	for _, l := range strings.Split(p, "\n") {
		if !strings.HasPrefix(l, " ") {
			return false
		}
	}
	return true
}

// dedent removes the indentation the lines of p share.
func dedent(p string) string {
	lines := strings.Split(p, "\n")
	min := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if min < 0 || n < min {
			min = n
		}
	}
	for i, l := range lines {
		if len(l) >= min {
			lines[i] = l[min:]
		}
	}
	return strings.Join(lines, "\n")
}

// code wraps s in backticks, choosing a fence that s does not contain.
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// cell escapes the pipes of a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
