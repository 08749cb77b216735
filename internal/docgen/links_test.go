package docgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckLinks(t *testing.T) {
	got, err := CheckLinks("testdata/links", []string{"README.md", "docs/guide.md"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, b := range got {
		lines = append(lines, b.String())
	}
	want := []string{
		"README.md:4: docs/missing.md: no such file: docs/missing.md",
		"README.md:4: docs/guide.md#nowhere: no such heading: docs/guide.md#nowhere",
		"README.md:5: ../../elsewhere.md: no such file inside the repository: ../../elsewhere.md",
		"README.md:14: docs/gone.md: no such file: docs/gone.md",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("broken links mismatch (-want +got):\n%s", diff)
	}
}

// TestRepositoryLinks checks every relative link of the README, the
// contributing guide and the pages of docs/: a reader who follows one
// finds the file and the heading it names.
func TestRepositoryLinks(t *testing.T) {
	const root = "../.."
	files := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var present []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			present = append(present, f)
		} else {
			t.Errorf("%s: missing (the README links it)", f)
		}
	}
	broken, err := CheckLinks(root, present)
	if err != nil {
		t.Fatal(err)
	}
	missing := map[string]bool{}
	for _, b := range broken {
		t.Errorf("%s", b)
		missing[b.Missing] = true
	}
	if len(missing) > 0 {
		var list []string
		for m := range missing {
			list = append(list, m)
		}
		t.Logf("missing link targets:\n  %s", strings.Join(sorted(list), "\n  "))
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
