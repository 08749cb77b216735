package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// fakeBackend is the backend config of the fake type: its token is read
// from the environment, and its address check refuses the host "refused".
type fakeBackend struct {
	URL   string `yaml:"url"`
	Token string `yaml:"token"`
	// defaulted is set by SetDefaults, to show it ran before Validate.
	Region string `yaml:"region"`
}

func (b *fakeBackend) SetDefaults() {
	if b.Region == "" {
		b.Region = "local"
	}
}

func (b *fakeBackend) Validate() error {
	if b.URL == "" {
		return fielderr.Errorf("url", "required")
	}
	return nil
}

func (b *fakeBackend) CheckAddress() error {
	if b.URL == "refused" {
		return fielderr.Errorf("url", "refused address")
	}
	return nil
}

// fakeJob is the job block of the fake type. Its Validate reports a syntax
// error at the first "!" of expr, at that byte of the value, and its
// Warnings a doubtful "?" in note, likewise, plus a warning about the
// whole of note when it is "todo".
type fakeJob struct {
	Expr string   `yaml:"expr"`
	Note string   `yaml:"note"`
	Args []string `yaml:"args"`
}

func (*fakeJob) SetDefaults() {}

func (j *fakeJob) Validate() error {
	if i := strings.IndexByte(j.Expr, '!'); i >= 0 {
		return fielderr.New("expr", i+1, errors.New("unexpected !"))
	}
	return nil
}

func (j *fakeJob) ArgNames() []string { return j.Args }

func (j *fakeJob) Warnings() error {
	var errs []error
	if i := strings.IndexByte(j.Note, '?'); i >= 0 {
		errs = append(errs, fielderr.New("note", i+1, errors.New("a question is not an answer")))
	}
	if j.Note == "todo" {
		errs = append(errs, fielderr.Errorf("note", "still to do"))
	}
	return errors.Join(errs...)
}

var fakeType = BackendType{
	Name:      "fake",
	NewConfig: func() Block { return new(fakeBackend) },
	NewJob:    func() JobBlock { return new(fakeJob) },
	EnvValues: func(c Block) []string { return []string{c.(*fakeBackend).Token} },
}

// fakeCatalog is a catalog with one backend of the fake type and one tool
// whose job block is job, indented under `job:` at column 7 (so the job's
// first line is line 11).
func fakeCatalog(job string) []byte {
	return []byte(`version: 1
backends:
  fake: {type: fake, url: "https://fake.example.com", token: "${FAKE_TOKEN}"}
tools:
  - name: t
    description: T.
    backend: fake
    title: T
    input_schema: {type: object, properties: {n: {type: integer}}}
    job:
` + job)
}

// TestProblemsInsideValues checks that a problem a block reports at a byte
// of a field's value is placed at that character of the file, whatever the
// value's YAML style.
func TestProblemsInsideValues(t *testing.T) {
	tests := []struct {
		name string
		job  string
		want string // file:line:col
	}{
		{"plain", "      expr: a + !b\n", "f.yaml:11:17"},
		{"plain after characters of two bytes", "      expr: é + !b\n", "f.yaml:11:17"},
		{"single-quoted, first character", "      expr: '!'\n", "f.yaml:11:14"},
		{"single-quoted", "      expr: 'a + !b'\n", "f.yaml:11:18"},
		{"single-quoted with a doubled quote", "      expr: 'it''s !b'\n", "f.yaml:11:20"},
		{"double-quoted", "      expr: \"a + !b\"\n", "f.yaml:11:18"},
		{"double-quoted with escapes", "      expr: \"a\\tb \\\"!\"\n", "f.yaml:11:21"},
		{"double-quoted with a \\u escape", "      expr: \"\\u00e9 !\"\n", "f.yaml:11:21"},
		{"flow mapping", "      {expr: \"a !\"}\n", "f.yaml:11:17"},
		{"literal block", "      expr: |\n        first line\n        second !x\n", "f.yaml:13:16"},
		{"literal block, empty and more indented lines", "      expr: |-\n        a\n\n          !b\n", "f.yaml:14:11"},
		{"literal block with a comment after the header", "      expr: | # the expression\n        a\n        b !\n", "f.yaml:13:11"},
		{"folded block", "      expr: >\n        one\n        two !x\n", "f.yaml:13:13"},
		{"folded block, paragraphs", "      expr: >\n        one\n        two\n\n        three !x\n", "f.yaml:15:15"},
		{"literal block with an indentation indicator", "      expr: |2\n          a\n        b !\n", "f.yaml:13:11"},
		// Not on one line: the value as a whole.
		{"plain over two lines", "      expr: a\n        b !c\n", "f.yaml:11:13"},
		{"double-quoted over two lines", "      expr: \"a\n        b !c\"\n", "f.yaml:11:13"},
		{"anchored", "      expr: &e 'a !'\n      note: *e\n", "f.yaml:11:19"},
		{"tagged", "      expr: !!str a !\n", "f.yaml:11:21"},
		// An alias: at the alias, which the value is not written at.
		{"alias", "      note: &e 'a !'\n      expr: *e\n", "f.yaml:12:13"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", fakeCatalog(tt.job), fakeType)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want Errors", err)
			}
			if len(errs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(errs), err)
			}
			want := tt.want + ": tools[0].job.expr: unexpected !"
			if got := errs[0].Error(); got != want {
				t.Errorf("problem = %q, want %q", got, want)
			}
		})
	}
}

// TestWarnings checks that the warnings of job blocks are positioned like
// errors and do not keep the catalog from loading.
func TestWarnings(t *testing.T) {
	job := "      expr: a\n      note: |\n        fine\n        sure?\n"
	c, err := Parse("f.yaml", fakeCatalog(job+"  - name: u\n    description: U.\n    backend: fake\n    input_schema: {type: object}\n    job: {note: todo}\n"), fakeType)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		"f.yaml:14:13: tools[0].job.note: a question is not an answer",
		"f.yaml:19:17: tools[1].job.note: still to do",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
}

// TestBackendTypes checks the wiring: the loader decodes blocks of the types
// it is given into the values their constructors return, runs the optional
// checks, and names the types it knows when a catalog uses another.
func TestBackendTypes(t *testing.T) {
	c, err := Parse("f.yaml", fakeCatalog("      expr: a\n      args: [x]\n"), fakeType)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(errs[0].Error(), "f.yaml:10:5: tools[0].job: placeholder {args.x} names no property") {
		t.Fatalf("Parse = %v, %v; want one error about {args.x} at the job", c, err)
	}

	c, err = Parse("f.yaml", fakeCatalog("      expr: a\n"), fakeType)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	wantBackend := &Backend{
		Name:    "fake",
		Type:    "fake",
		Config:  &fakeBackend{URL: "https://fake.example.com", Token: "${FAKE_TOKEN}", Region: "local"},
		EnvRefs: []string{"FAKE_TOKEN"},
		Pos:     Position{"f.yaml", 3, 3},
	}
	if diff := cmp.Diff(wantBackend, c.Backends["fake"]); diff != "" {
		t.Errorf("backend mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(any(&fakeJob{Expr: "a"}), c.Tools[0].Job); diff != "" {
		t.Errorf("job mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"FAKE_TOKEN"}, c.EnvRefs()); diff != "" {
		t.Errorf("EnvRefs mismatch (-want +got):\n%s", diff)
	}

	other := BackendType{Name: "other", NewConfig: func() Block { return new(fakeBackend) }, NewJob: func() JobBlock { return new(fakeJob) }}
	tests := []struct {
		name  string
		src   string
		types []BackendType
		want  string
	}{
		{"address check", `fake: {type: fake, url: refused}`, []BackendType{fakeType},
			"f.yaml:3:27: backends.fake.url: refused address"},
		{"unknown type", `fake: {type: rest, url: x}`, []BackendType{fakeType, other},
			`f.yaml:3:16: backends.fake.type: unknown backend type "rest" (known: fake, other)`},
		{"missing type", `fake: {url: x}`, []BackendType{fakeType, other},
			"f.yaml:3:3: backends.fake.type: required (known: fake, other)"},
		{"no types", `fake: {type: fake, url: x}`, nil,
			`f.yaml:3:16: backends.fake.type: unknown backend type "fake" (this program knows no backend types)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nbackends:\n  " + tt.src + "\ntools:\n  - {name: t, description: T., backend: fake, input_schema: {type: object}, job: {}}\n"
			_, err := Parse("f.yaml", []byte(src), tt.types...)
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("Parse error = %v, want one problem", err)
			}
			if got := errs[0].Error(); got != tt.want {
				t.Errorf("problem = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMalformedBackendTypes checks that types the program got wrong are a
// plain error, not a problem of the file.
func TestMalformedBackendTypes(t *testing.T) {
	notPointer := BackendType{Name: "x", NewConfig: func() Block { return fakeValue{} }, NewJob: fakeType.NewJob}
	tests := []struct {
		name  string
		types []BackendType
		want  string
	}{
		{"no name", []BackendType{{NewConfig: fakeType.NewConfig, NewJob: fakeType.NewJob}}, "backend type 0 has no name"},
		{"twice", []BackendType{fakeType, fakeType}, `backend type "fake" is given twice`},
		{"no job constructor", []BackendType{{Name: "x", NewConfig: fakeType.NewConfig}}, `backend type "x": NewJob must return`},
		{"not a pointer", []BackendType{notPointer}, `backend type "x": NewConfig must return`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", fakeCatalog("      expr: a\n"), tt.types...)
			var errs Errors
			if err == nil || errors.As(err, &errs) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want a plain error containing %q", err, tt.want)
			}
		})
	}
}

type fakeValue struct{}

func (fakeValue) SetDefaults()    {}
func (fakeValue) Validate() error { return nil }
