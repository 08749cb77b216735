package docgen

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Broken is a relative link whose target does not exist.
type Broken struct {
	// File and Line are where the link is written.
	File string
	Line int
	// Target is the link as written.
	Target string
	// Missing is the file, or the file and heading anchor, not found.
	Missing string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: %s: no such %s", b.File, b.Line, b.Target, b.Missing)
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	anchorTag  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// CheckLinks reads the Markdown files (paths relative to root) and returns
// every relative link whose file, or whose heading anchor in a Markdown
// file, does not exist. Links with a scheme (https:, mailto:) are not
// checked; links inside code are not links.
func CheckLinks(root string, files []string) ([]Broken, error) {
	var broken []Broken
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		a, err := Anchors(filepath.Join(root, file))
		anchors[file] = a
		return a, err
	}
	for _, file := range files {
		links, err := relativeLinks(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			target, frag, _ := strings.Cut(l.target, "#")
			if p, err := url.PathUnescape(target); err == nil {
				target = p
			}
			resolved := file
			if target != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), target)))
			}
			if strings.HasPrefix(resolved, "../") {
				broken = append(broken, Broken{file, l.line, l.target, "file inside the repository: " + resolved})
				continue
			}
			if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
				broken = append(broken, Broken{file, l.line, l.target, "file: " + resolved})
				continue
			}
			if frag == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			a, err := anchorsOf(resolved)
			if err != nil {
				return nil, err
			}
			if !a[frag] {
				broken = append(broken, Broken{file, l.line, l.target, "heading: " + resolved + "#" + frag})
			}
		}
	}
	return broken, nil
}

type link struct {
	line   int
	target string
}

// relativeLinks returns the links of a Markdown file that have no scheme,
// outside fenced code blocks and code spans.
func relativeLinks(file string) ([]link, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []link
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fence := ""
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			t = strings.Trim(t, "<>")
			if u, err := url.Parse(t); err == nil && (u.Scheme != "" || u.Host != "") {
				continue
			}
			out = append(out, link{n, t})
		}
	}
	return out, s.Err()
}

// fenceOf returns the fence (``` or ~~~, as long as written) a line opens
// or closes, or "".
func fenceOf(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(t, c+c+c) {
			return t[:len(t)-len(strings.TrimLeft(t, c))]
		}
	}
	return ""
}

// Anchors returns the anchors of a Markdown file's headings, as GitHub
// makes them (a repeated heading gets -1, -2, ...), and of its
// <a id="..."> and <a name="..."> tags.
func Anchors(file string) (map[string]bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(data), "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range anchorTag.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := strings.NewReplacer("`", "", "*", "").Replace(m[1])
		text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
		slug := Slug(text)
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out, nil
}
