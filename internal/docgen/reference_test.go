package docgen

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/refmod/reference.md")

// TestRenderReference renders the fixture module's config types and
// compares the page with testdata/refmod/reference.md: keys from yaml
// tags (an untagged field lower-cased, "-" and unexported fields left out,
// inline structs spliced in), types in YAML words with links to the
// sections of struct types, blocks decoded later described by the
// caller, doc links resolved, and undocumented fields reported.
func TestRenderReference(t *testing.T) {
	l, err := NewLoader("testdata/refmod")
	if err != nil {
		t.Fatal(err)
	}
	r := Reference{
		Title:  "Fixture reference",
		Intro:  "Keys of the fixture.",
		Blocks: map[string]Block{"later": {Text: "a later block", Link: "#later"}},
		Parts: []Part{{
			Heading: "The file",
			Roots:   []Root{{Type: TypeRef{"example.com/refmod/conf", "Root"}}},
		}},
	}
	var got bytes.Buffer
	res, err := l.RenderReference(&got, r, "go test -update")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"conf.Root.Codes (codes)"}, res.Undocumented); diff != "" {
		t.Errorf("undocumented fields mismatch (-want +got):\n%s", diff)
	}
	const golden = "testdata/refmod/reference.md"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("reference mismatch (-want +got); go test ./internal/docgen -run TestRenderReference -update rewrites it:\n%s", diff)
	}
}

func TestRenderReferenceUnknownType(t *testing.T) {
	l, err := NewLoader("testdata/refmod")
	if err != nil {
		t.Fatal(err)
	}
	r := Reference{Parts: []Part{{Roots: []Root{{Type: TypeRef{"example.com/refmod/conf", "Missing"}}}}}}
	if _, err := l.RenderReference(&bytes.Buffer{}, r, ""); err == nil {
		t.Fatal("rendering a type that does not exist succeeded")
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"jobbridge serve":         "jobbridge-serve",
		"rest.BackendConfig":      "restbackendconfig",
		"tools[]":                 "tools",
		"Backend type `rest`":     "backend-type-rest",
		"When things go wrong":    "when-things-go-wrong",
		"Push: events, not polls": "push-events-not-polls",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
