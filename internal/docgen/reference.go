package docgen

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// TypeRef names a Go type of the module: its package's import path and its
// name.
type TypeRef struct {
	Pkg, Name string
}

func (r TypeRef) String() string { return path.Base(r.Pkg) + "." + r.Name }

// Loader reads the non-test Go files of a module's packages, with their
// doc comments.
type Loader struct {
	root, module string
	fset         *token.FileSet
	pkgs         map[string]*pkgInfo
}

type pkgInfo struct {
	path    string
	doc     *doc.Package
	types   map[string]*ast.TypeSpec
	docs    map[string]string // type name -> doc comment
	imports map[string]string // local name -> import path
}

// NewLoader returns a loader for the module whose go.mod is in root.
func NewLoader(root string) (*Loader, error) {
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	return &Loader{root: root, module: module, fset: token.NewFileSet(), pkgs: map[string]*pkgInfo{}}, nil
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// inModule reports whether an import path is one of the module's packages.
func (l *Loader) inModule(p string) bool {
	return p == l.module || strings.HasPrefix(p, l.module+"/")
}

func (l *Loader) pkg(importPath string) (*pkgInfo, error) {
	if p, ok := l.pkgs[importPath]; ok {
		return p, nil
	}
	if !l.inModule(importPath) {
		return nil, fmt.Errorf("package %s is not in module %s", importPath, l.module)
	}
	dir := filepath.Join(l.root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(importPath, l.module), "/")))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	p := &pkgInfo{path: importPath, types: map[string]*ast.TypeSpec{}, docs: map[string]string{}, imports: map[string]string{}}
	for _, f := range files {
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			name := importName(ip)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			p.imports[name] = ip
		}
	}
	p.doc, err = doc.NewFromFiles(l.fset, files, importPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	var add func(ts []*doc.Type)
	add = func(ts []*doc.Type) {
		for _, t := range ts {
			for _, s := range t.Decl.Specs {
				if spec, ok := s.(*ast.TypeSpec); ok && spec.Name.Name == t.Name {
					p.types[t.Name] = spec
					p.docs[t.Name] = t.Doc
				}
			}
		}
	}
	add(p.doc.Types)
	l.pkgs[importPath] = p
	return p, nil
}

// importName guesses the package name of an import path: its last element,
// without a major version suffix (".v3", "/v5").
func importName(p string) string {
	elems := strings.Split(p, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && regexp.MustCompile(`^v[0-9]+$`).MatchString(last) {
		last = elems[len(elems)-2]
	}
	if i := strings.Index(last, ".v"); i > 0 {
		last = last[:i]
	}
	return strings.ReplaceAll(last, "-", "")
}

// Reference describes the catalog reference: its parts and how to read the
// YAML blocks that are decoded later than their parents (fields of type
// *yaml.Node).
type Reference struct {
	Title string
	// Intro is Markdown printed under the title.
	Intro string
	Parts []Part
	// Blocks say what a *yaml.Node field at a YAML path holds.
	Blocks map[string]Block
	// Titles replace the "pkg.Type" headings of some types (unexported
	// ones, say).
	Titles map[TypeRef]string
}

// Part is a section of the reference: a heading, an introduction and the
// types documented under it, starting from its roots.
type Part struct {
	Heading string
	Intro   string
	Roots   []Root
}

// Root is a type decoded at a YAML path ("" for the top level).
type Root struct {
	Path string
	Type TypeRef
}

// Block is what a field decoded later holds: a type documented in the
// reference, or text (and a link) saying where it is described.
type Block struct {
	Type *TypeRef
	Text string
	Link string
}

// Result is what RenderReference found while rendering.
type Result struct {
	// Undocumented lists the fields that have no doc comment, as
	// "pkg.Type.Field (yaml key)".
	Undocumented []string
}

type section struct {
	ref   TypeRef
	title string
	paths []string
	part  int
}

// RenderReference writes the reference as Markdown. regenerate is the
// command that rewrites the file, printed in its header.
func (l *Loader) RenderReference(w io.Writer, r Reference, regenerate string) (Result, error) {
	var res Result
	var order []*section
	byRef := map[TypeRef]*section{}
	title := func(t TypeRef) string {
		if s, ok := r.Titles[t]; ok {
			return s
		}
		return t.String()
	}
	// Discover every struct type reachable from the roots, breadth first,
	// with the YAML paths where it appears.
	type item struct {
		ref  TypeRef
		path string
		part int
	}
	var queue []item
	for i, p := range r.Parts {
		for _, root := range p.Roots {
			queue = append(queue, item{root.Type, root.Path, i})
		}
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if s, ok := byRef[it.ref]; ok {
			if !slices.Contains(s.paths, it.path) {
				s.paths = append(s.paths, it.path)
			}
			continue
		}
		s := &section{ref: it.ref, title: title(it.ref), paths: []string{it.path}, part: it.part}
		byRef[it.ref] = s
		order = append(order, s)
		fields, err := l.fields(it.ref)
		if err != nil {
			return res, err
		}
		for _, f := range fields {
			fp := joinPath(it.path, f.key)
			if f.node {
				if b, ok := r.Blocks[fp]; ok && b.Type != nil {
					queue = append(queue, item{*b.Type, fp, it.part})
				}
				continue
			}
			for _, ref := range f.refs {
				queue = append(queue, item{ref.ref, fp + ref.suffix, it.part})
			}
		}
	}
	link := func(t TypeRef) (string, bool) {
		s, ok := byRef[t]
		if !ok {
			return "", false
		}
		return "#" + Slug(s.title), true
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", r.Title)
	fmt.Fprintf(&b, "<!-- Generated from the doc comments of the catalog's Go types; do not edit.\n     Regenerate with: %s -->\n\n", regenerate)
	if r.Intro != "" {
		b.WriteString(strings.TrimSpace(r.Intro) + "\n\n")
	}
	for i, p := range r.Parts {
		fmt.Fprintf(&b, "## %s\n\n", p.Heading)
		if p.Intro != "" {
			b.WriteString(strings.TrimSpace(p.Intro) + "\n\n")
		}
		for _, s := range order {
			if s.part != i {
				continue
			}
			info, err := l.pkg(s.ref.Pkg)
			if err != nil {
				return res, err
			}
			fmt.Fprintf(&b, "### %s\n\n", s.title)
			var at []string
			for _, p := range s.paths {
				if p != "" {
					at = append(at, "`"+p+"`")
				}
			}
			if len(at) > 0 {
				fmt.Fprintf(&b, "At %s.\n\n", strings.Join(at, ", "))
			}
			if _, titled := r.Titles[s.ref]; !titled {
				d := markdown(info, info.docs[s.ref.Name], link)
				if first, rest, ok := strings.Cut(d, " "); ok && first == s.ref.Name {
					d = "`" + s.ref.String() + "` " + rest
				}
				if d != "" {
					b.WriteString(d + "\n\n")
				}
			}
			fields, err := l.fields(s.ref)
			if err != nil {
				return res, err
			}
			if len(fields) == 0 {
				continue
			}
			b.WriteString("| key | type | meaning |\n|---|---|---|\n")
			for _, f := range fields {
				typ := f.typ
				if f.node {
					typ = "YAML"
					if blk, ok := r.Blocks[joinPath(s.paths[0], f.key)]; ok {
						switch {
						case blk.Type != nil:
							if u, ok := link(*blk.Type); ok {
								typ = "[" + title(*blk.Type) + "](" + u + ")"
							}
						case blk.Link != "":
							typ = "[" + blk.Text + "](" + blk.Link + ")"
						default:
							typ = blk.Text
						}
					}
				} else {
					for _, ref := range f.refs {
						if u, ok := link(ref.ref); ok {
							typ = strings.Replace(typ, "«"+ref.ref.String()+"»", "["+title(ref.ref)+"]("+u+")", 1)
						}
					}
					typ = strings.NewReplacer("«", "", "»", "").Replace(typ)
				}
				text := strings.Join(strings.Fields(markdown(f.pkg, f.doc, link)), " ")
				if first, rest, ok := strings.Cut(text, " "); ok && strings.TrimRight(first, ",:;") == f.goName {
					text = "`" + f.key + "`" + strings.TrimPrefix(first, f.goName) + " " + rest
				}
				if text == "" {
					text = "**Undocumented.**"
					if u := fmt.Sprintf("%s.%s (%s)", f.owner, f.goName, f.key); !slices.Contains(res.Undocumented, u) {
						res.Undocumented = append(res.Undocumented, u)
					}
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.key, cell(typ), cell(text))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return res, err
}

// markdown converts a doc comment of package p to Markdown. Unlike
// go/doc's printer it keeps the comment's back-quoted code as code, fences
// code blocks, links Go doc links ([Name], [pkg.Name]) to the reference's
// sections and prints other doc links as code.
func markdown(p *pkgInfo, text string, link func(TypeRef) (string, bool)) string {
	d := p.doc.Parser().Parse(text)
	var b strings.Builder
	for i, blk := range d.Content {
		if i > 0 {
			b.WriteString("\n\n")
		}
		switch x := blk.(type) {
		case *comment.Paragraph:
			b.WriteString(inline(p, x.Text, link))
		case *comment.Heading:
			b.WriteString("#### " + inline(p, x.Text, link))
		case *comment.Code:
			b.WriteString("```\n" + strings.TrimRight(x.Text, "\n") + "\n```")
		case *comment.List:
			for j, item := range x.Items {
				if j > 0 {
					b.WriteString("\n")
				}
				var parts []string
				for _, c := range item.Content {
					if para, ok := c.(*comment.Paragraph); ok {
						parts = append(parts, inline(p, para.Text, link))
					}
				}
				marker := "-"
				if item.Number != "" {
					marker = item.Number + "."
				}
				b.WriteString(marker + " " + strings.Join(strings.Fields(strings.Join(parts, " ")), " "))
			}
		}
	}
	return b.String()
}

func inline(p *pkgInfo, text []comment.Text, link func(TypeRef) (string, bool)) string {
	var b strings.Builder
	for _, t := range text {
		switch x := t.(type) {
		case comment.Plain:
			b.WriteString(string(x))
		case comment.Italic:
			b.WriteString("*" + string(x) + "*")
		case *comment.Link:
			b.WriteString(inline(p, x.Text, link))
		case *comment.DocLink:
			ip := x.ImportPath
			if ip == "" {
				ip = p.path
			}
			name := x.Name
			if x.Recv != "" {
				name = x.Recv
			}
			words := inline(p, x.Text, link)
			if u, ok := link(TypeRef{ip, name}); ok {
				b.WriteString("[" + words + "](" + u + ")")
			} else {
				b.WriteString("`" + words + "`")
			}
		}
	}
	return b.String()
}

// field is one YAML key of a struct type.
type field struct {
	key, goName string
	typ         string // with «pkg.Type» marks where a documented type goes
	doc         string
	node        bool // *yaml.Node: decoded later
	refs        []fieldRef
	// pkg and owner are the package and struct type that declare the
	// field (an inline struct's, for its fields).
	pkg   *pkgInfo
	owner TypeRef
}

// fieldRef is a struct type a field leads to, and the YAML path suffix at
// which it is decoded ("", "[]" or ".NAME").
type fieldRef struct {
	ref    TypeRef
	suffix string
}

// fields lists the YAML keys of a struct type in declaration order, as the
// catalog's decoder sees them: `yaml:"-"` and unexported fields skipped,
// `yaml:",inline"` structs spliced in, an untagged field under its
// lower-cased name.
func (l *Loader) fields(t TypeRef) ([]field, error) {
	p, err := l.pkg(t.Pkg)
	if err != nil {
		return nil, err
	}
	spec, ok := p.types[t.Name]
	if !ok {
		return nil, fmt.Errorf("type %s not found", t)
	}
	st, ok := spec.Type.(*ast.StructType)
	if !ok {
		return nil, nil
	}
	var out []field
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s).Get("yaml")
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ref, ok := l.resolve(p, f.Type)
			if !ok {
				return nil, fmt.Errorf("%s: inline field of a type outside the module", t)
			}
			inner, err := l.fields(ref)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
			continue
		}
		for _, id := range f.Names {
			if !id.IsExported() {
				continue
			}
			key := name
			if key == "" {
				key = strings.ToLower(id.Name)
			}
			fd := field{key: key, goName: id.Name, doc: commentText(f.Doc), pkg: p, owner: t}
			if fd.doc == "" {
				fd.doc = commentText(f.Comment)
			}
			if isYAMLNode(p, f.Type) {
				fd.node = true
			} else {
				fd.typ, fd.refs = l.describe(p, f.Type, "")
			}
			out = append(out, fd)
		}
		if len(f.Names) == 0 && ast.IsExported(embeddedName(f.Type)) {
			return nil, fmt.Errorf("%s: embedded field %s without yaml:\",inline\"", t, embeddedName(f.Type))
		}
	}
	return out, nil
}

func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.TrimSpace(g.Text())
}

func embeddedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

func isYAMLNode(p *pkgInfo, e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && sel.Sel.Name == "Node" && strings.HasPrefix(p.imports[x.Name], "gopkg.in/yaml")
}

// resolve returns the module type an expression names (through a pointer).
func (l *Loader) resolve(p *pkgInfo, e ast.Expr) (TypeRef, bool) {
	switch x := e.(type) {
	case *ast.StarExpr:
		return l.resolve(p, x.X)
	case *ast.Ident:
		if _, ok := p.types[x.Name]; ok {
			return TypeRef{p.path, x.Name}, true
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			if ip := p.imports[id.Name]; l.inModule(ip) {
				return TypeRef{ip, x.Sel.Name}, true
			}
		}
	}
	return TypeRef{}, false
}

// describe renders a field's type for a reader of YAML, marking the
// module's struct types as «pkg.Type» for links.
func (l *Loader) describe(p *pkgInfo, e ast.Expr, suffix string) (string, []fieldRef) {
	switch x := e.(type) {
	case *ast.StarExpr:
		return l.describe(p, x.X, suffix)
	case *ast.ArrayType:
		s, refs := l.describe(p, x.Elt, suffix+"[]")
		return "list of " + s, refs
	case *ast.MapType:
		s, refs := l.describe(p, x.Value, suffix+".NAME")
		return "map of string to " + s, refs
	case *ast.InterfaceType:
		return "any YAML value", nil
	case *ast.Ident:
		switch x.Name {
		case "string":
			return "string", nil
		case "bool":
			return "boolean", nil
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
			return "integer", nil
		case "float32", "float64":
			return "number", nil
		case "any":
			return "any YAML value", nil
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			switch p.imports[id.Name] + "." + x.Sel.Name {
			case "time.Duration":
				return "duration", nil
			case "encoding/json.RawMessage":
				return "any YAML value", nil
			}
		}
	}
	ref, ok := l.resolve(p, e)
	if !ok {
		return "unknown", nil
	}
	tp, err := l.pkg(ref.Pkg)
	if err != nil {
		return ref.String(), nil
	}
	spec, ok := tp.types[ref.Name]
	if !ok {
		return ref.String(), nil
	}
	if _, isStruct := spec.Type.(*ast.StructType); isStruct {
		return "«" + ref.String() + "»", []fieldRef{{ref, suffix}}
	}
	// A named non-struct type: its underlying type, and the first sentence
	// of its doc when it says how it is written.
	s, refs := l.describe(tp, spec.Type, suffix)
	if d := tp.doc.Synopsis(tp.docs[ref.Name]); d != "" {
		s += " (" + strings.TrimSuffix(d, ".") + ")"
	}
	return s, refs
}

func joinPath(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

// Slug is the anchor GitHub gives a Markdown heading: lower case, spaces
// to hyphens, punctuation other than hyphens and underscores removed.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
