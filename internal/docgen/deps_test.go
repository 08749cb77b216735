package docgen

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDirectDependencies(t *testing.T) {
	got, err := DirectDependencies("testdata/deps.go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"example.com/single", "example.com/a", "example.com/b/v2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DirectDependencies mismatch (-want +got):\n%s", diff)
	}
}

// TestDesignNamesEveryDependency checks that docs/design.md names every
// direct dependency of go.mod: a dependency added without saying why fails
// here.
func TestDesignNamesEveryDependency(t *testing.T) {
	deps, err := DirectDependencies("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		if !strings.Contains(string(page), "`"+d+"`") {
			t.Errorf("docs/design.md does not name the direct dependency `%s` (say why under \"Dependencies and why\")", d)
		}
	}
}
