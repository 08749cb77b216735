package docgen

import (
	"bufio"
	"os"
	"strings"
)

// DirectDependencies returns the module paths a go.mod file requires
// directly (those not marked "// indirect"), in file order.
func DirectDependencies(gomod string) ([]string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var deps []string
	inBlock := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimSpace(strings.TrimPrefix(line, "require "))
		case !inBlock:
			continue
		}
		code, comment, _ := strings.Cut(line, "//")
		if strings.Contains(comment, "indirect") {
			continue
		}
		if fields := strings.Fields(code); len(fields) == 2 {
			deps = append(deps, fields[0])
		}
	}
	return deps, s.Err()
}
