package main

import (
	"bytes"
	"context"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/docgen"
)

// The generated pages of docs/: rewritten by `go test ./cmd/jobbridge -run
// 'TestCommandsDoc|TestCatalogReferenceDoc' -update` (make docs), compared
// with the checked-in files otherwise (make test, make docs-check).
var updateDocs = flag.Bool("update", false, "rewrite docs/commands.md and docs/catalog-reference.md")

const (
	commandsDoc         = "../../docs/commands.md"
	catalogReferenceDoc = "../../docs/catalog-reference.md"
	regenerateDocs      = "make docs (go test ./cmd/jobbridge -run 'TestCommandsDoc|TestCatalogReferenceDoc' -update)"
)

// TestCommandsDoc checks that docs/commands.md is what the commands print
// for -h: every command the program dispatches, its synopsis, description,
// examples and flags with their defaults.
func TestCommandsDoc(t *testing.T) {
	neutralEnvironment(t)
	names := dispatchedCommands(t)
	if len(names) == 0 {
		t.Fatal("found no commands in main.go's dispatch")
	}
	var overview bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, strings.NewReader(""), &overview, &overview); err != nil {
		t.Fatalf("jobbridge --help: %v", err)
	}
	var cmds []docgen.Command
	for _, name := range names {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{name, "-h"}, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("jobbridge %s -h: %v (stderr: %s)", name, err, stderr.String())
		}
		c, err := docgen.ParseHelp(name, stdout.String())
		if err != nil {
			t.Fatalf("jobbridge %s -h: %v\n%s", name, err, stdout.String())
		}
		cmds = append(cmds, c)
	}
	var got bytes.Buffer
	if err := docgen.RenderCommands(&got, overview.String(), cmds, regenerateDocs); err != nil {
		t.Fatal(err)
	}
	compareGenerated(t, commandsDoc, got.Bytes())
}

// TestCatalogReferenceDoc checks that docs/catalog-reference.md is what
// the doc comments of the catalog's types and of every backend type's
// config and job types say, field by field.
func TestCatalogReferenceDoc(t *testing.T) {
	got, res := renderCatalogReference(t)
	compareGenerated(t, catalogReferenceDoc, got)
	if len(res.Undocumented) > 0 {
		t.Errorf("catalog fields without a doc comment (docs/catalog-reference.md says \"Undocumented\"); add one to each:\n  %s",
			strings.Join(res.Undocumented, "\n  "))
	}
}

func renderCatalogReference(t *testing.T) ([]byte, docgen.Result) {
	t.Helper()
	l, err := docgen.NewLoader("../..")
	if err != nil {
		t.Fatal(err)
	}
	catalogPkg := reflect.TypeFor[catalog.Catalog]().PkgPath()
	ref := func(v any) *docgen.TypeRef {
		rt := reflect.TypeOf(v)
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		return &docgen.TypeRef{Pkg: rt.PkgPath(), Name: rt.Name()}
	}
	r := docgen.Reference{
		Title: "Catalog reference",
		Intro: "Every key a catalog may contain, generated from the doc comments of the Go types it is decoded into.\n" +
			"[Writing a catalog](catalog.md) explains how the keys work together, with examples.\n" +
			"Durations use Go syntax with a unit (`500ms`, `2s`, `1h`). Unknown keys are errors;\n" +
			"top-level keys starting with `x-` are ignored, so that YAML anchors can live there.",
		Blocks: map[string]docgen.Block{
			"auth":                 {Type: ref(auth.Config{})},
			"limits":               {Type: ref(catalog.Limits{})},
			"backends":             {Text: "map of backend blocks by name", Link: "#backend-types"},
			"tools[].job":          {Text: "the job block of the tool's backend type", Link: "#backend-types"},
			"tools[].input_schema": {Text: "JSON Schema (draft 2020-12) of `type: object`"},
		},
		Titles: map[docgen.TypeRef]string{
			{Pkg: catalogPkg, Name: "document"}:  "Top level",
			{Pkg: catalogPkg, Name: "settings"}:  "defaults",
			{Pkg: catalogPkg, Name: "toolEntry"}: "tools[]",
		},
		Parts: []docgen.Part{{
			Heading: "The catalog file",
			Roots:   []docgen.Root{{Path: "", Type: docgen.TypeRef{Pkg: catalogPkg, Name: "document"}}},
		}},
	}
	var kinds []string
	for _, k := range backendKinds {
		kinds = append(kinds, "`"+k.Name+"`")
	}
	r.Parts = append(r.Parts, docgen.Part{
		Heading: "Backend types",
		Intro: "Each entry of `backends:` names its adapter with `type:` (" + strings.Join(kinds, ", ") + ") and takes that type's keys;\n" +
			"the `job:` block of each tool on the backend takes the type's job keys. Backend names match `[a-z][a-z0-9_-]*`.",
	})
	for _, k := range backendKinds {
		r.Parts = append(r.Parts, docgen.Part{
			Heading: "Backend type `" + k.Name + "`",
			Roots: []docgen.Root{
				{Path: "backends.NAME", Type: *ref(k.NewConfig())},
				{Path: "tools[].job", Type: *ref(k.NewJob())},
			},
		})
	}
	var out bytes.Buffer
	res, err := l.RenderReference(&out, r, regenerateDocs)
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), res
}

// compareGenerated writes got to file with -update, and otherwise fails
// when the checked-in file differs, naming the first line that does and
// the command that regenerates it.
func compareGenerated(t *testing.T, file string, got []byte) {
	t.Helper()
	if *updateDocs {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v; generate it with: %s", err, regenerateDocs)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	i := 0
	for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
		i++
	}
	line := func(ls []string) string {
		if i < len(ls) {
			return strconv.Quote(ls[i])
		}
		return "(end of file)"
	}
	t.Errorf("%s is out of date with the code; regenerate it with: %s\nfirst difference at line %d:\n  checked in: %s\n  generated:  %s",
		filepath.Base(file), regenerateDocs, i+1, line(wl), line(gl))
}

// dispatchedCommands returns the command names main.go's dispatch switch
// handles, in its order: a command added there is documented without
// further ado.
func dispatchedCommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		fd, ok := n.(*ast.FuncDecl)
		if ok && fd.Name.Name != "dispatch" {
			return false
		}
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		for _, e := range cc.List {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			s, _ := strconv.Unquote(lit.Value)
			if s != "" && !strings.HasPrefix(s, "-") && s != "help" {
				names = append(names, s)
			}
		}
		return true
	})
	return names
}

// neutralEnvironment clears what makes help text depend on the machine:
// the JOBBRIDGE_* variables some flags take their defaults from, and the
// home and state directories.
func neutralEnvironment(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "JOBBRIDGE_") || strings.HasPrefix(k, "XDG_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", "~")
	t.Setenv("USER", "user")
	t.Setenv("COLUMNS", "100")
}

// TestReadmeCatalogExample checks the catalog the README shows: it is
// docs/examples/first-catalog.yaml word for word, and it loads as
// `jobbridge validate` loads a catalog, without errors or warnings.
func TestReadmeCatalogExample(t *testing.T) {
	const example = "docs/examples/first-catalog.yaml"
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, ok := fencedAfter(string(readme), "<!-- "+example)
	if !ok {
		t.Fatalf("README.md has no fenced block after a comment naming %s (<!-- %s ... -->)", example, example)
	}
	file, err := os.ReadFile("../../" + example)
	if err != nil {
		t.Fatal(err)
	}
	if block != string(file) {
		t.Errorf("the README's catalog differs from %s; make them equal again\nREADME:\n%s\nfile:\n%s", example, block, file)
	}
	cat, err := catalog.Load("../../"+example, catalogTypes()...)
	if err != nil {
		t.Fatalf("%s does not load: %v", example, err)
	}
	if len(cat.Warnings) > 0 {
		t.Errorf("%s loads with warnings: %v", example, cat.Warnings)
	}
	if len(cat.Tools) == 0 {
		t.Errorf("%s declares no tool", example)
	}
}

// fencedAfter returns the content of the first fenced code block after the
// line starting with marker.
func fencedAfter(doc, marker string) (string, bool) {
	i := strings.Index(doc, "\n"+marker)
	if i < 0 {
		return "", false
	}
	rest := doc[i+1:]
	start := strings.Index(rest, "\n```")
	if start < 0 {
		return "", false
	}
	rest = rest[start+1:]
	nl := strings.Index(rest, "\n")
	if nl < 0 {
		return "", false
	}
	body := rest[nl+1:]
	end := strings.Index(body, "```\n")
	if end < 0 || (end > 0 && body[end-1] != '\n') {
		return "", false
	}
	return body[:end], true
}
