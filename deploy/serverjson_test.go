package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The server.json schema of the official MCP Registry this entry follows:
// https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json
// (the registry's docs/reference/server-json). validateServerJSON checks the
// rules of that schema the entry relies on, and the official registry's own
// requirements for OCI packages.
const serverSchema = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

type serverJSON struct {
	Schema      string `json:"$schema"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Version     string `json:"version"`
	WebsiteURL  string `json:"websiteUrl"`
	Repository  *struct {
		URL    string `json:"url"`
		Source string `json:"source"`
	} `json:"repository"`
	Packages []registryPackage `json:"packages"`
	Remotes  []transport       `json:"remotes"`
}

type registryPackage struct {
	RegistryType         string     `json:"registryType"`
	Identifier           string     `json:"identifier"`
	Version              string     `json:"version"`
	RuntimeHint          string     `json:"runtimeHint"`
	Transport            *transport `json:"transport"`
	RuntimeArguments     []argument `json:"runtimeArguments"`
	PackageArguments     []argument `json:"packageArguments"`
	EnvironmentVariables []struct {
		input
		Name string `json:"name"`
	} `json:"environmentVariables"`
}

type transport struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

type argument struct {
	input
	Type       string           `json:"type"`
	Name       string           `json:"name"`
	ValueHint  string           `json:"valueHint"`
	IsRepeated bool             `json:"isRepeated"`
	Variables  map[string]input `json:"variables"`
}

// input is the schema's Input: what a client may ask its user for.
type input struct {
	Description string   `json:"description"`
	IsRequired  bool     `json:"isRequired"`
	Format      string   `json:"format"`
	Value       string   `json:"value"`
	IsSecret    bool     `json:"isSecret"`
	Default     string   `json:"default"`
	Placeholder string   `json:"placeholder"`
	Choices     []string `json:"choices"`
}

func loadServerJSON(t *testing.T) serverJSON {
	t.Helper()
	b, err := os.ReadFile("../server.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := decodeServerJSON(b)
	if err != nil {
		t.Fatalf("server.json: %v", err)
	}
	return s
}

func decodeServerJSON(b []byte) (serverJSON, error) {
	var s serverJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&s)
	return s, err
}

// ociPackage returns the entry's OCI image package.
func ociPackage(t *testing.T, s serverJSON) registryPackage {
	t.Helper()
	for _, p := range s.Packages {
		if p.RegistryType == "oci" {
			return p
		}
	}
	t.Fatal("server.json has no oci package")
	return registryPackage{}
}

var (
	serverName = regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`)
	// A version range or "latest" is refused; a specific version is wanted.
	versionRange = regexp.MustCompile(`^(latest|[\^~<>=].*|.*\.[x*](\..*)?)$`)
	// Registries the official MCP Registry accepts OCI images from.
	ociRegistries = regexp.MustCompile(`^(docker\.io|ghcr\.io|[a-z0-9-]+\.pkg\.dev|[a-z0-9]+\.azurecr\.io|mcr\.microsoft\.com)/`)
)

// validateServerJSON checks an entry against the schema's required fields
// and constraints and the official registry's OCI rules, and returns every
// problem.
func validateServerJSON(s serverJSON) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.Schema != serverSchema {
		bad("$schema %q, want %q", s.Schema, serverSchema)
	}
	if n := len(s.Name); n < 3 || n > 200 || !serverName.MatchString(s.Name) {
		bad("name %q: want namespace/name in reverse DNS, 3 to 200 characters", s.Name)
	}
	if n := len(s.Description); n < 1 || n > 100 {
		bad("description: %d characters, want 1 to 100", n)
	}
	if n := len(s.Title); n > 100 {
		bad("title: %d characters, want at most 100", n)
	}
	if s.Version == "" || len(s.Version) > 255 || versionRange.MatchString(s.Version) {
		bad("version %q: want a specific version", s.Version)
	}
	if s.Repository != nil && (s.Repository.URL == "" || s.Repository.Source == "") {
		bad("repository: url and source are required")
	}
	if s.WebsiteURL != "" {
		if u, err := url.Parse(s.WebsiteURL); err != nil || u.Scheme != "https" {
			bad("websiteUrl %q: want an https URL", s.WebsiteURL)
		}
	}
	if len(s.Packages) == 0 && len(s.Remotes) == 0 {
		bad("neither packages nor remotes: a client could not run the server")
	}
	for i, p := range s.Packages {
		if !slices.Contains([]string{"npm", "pypi", "nuget", "oci", "mcpb"}, p.RegistryType) {
			bad("packages[%d]: registryType %q", i, p.RegistryType)
		}
		if p.Identifier == "" {
			bad("packages[%d]: identifier is required", i)
		}
		if p.Transport == nil || !slices.Contains([]string{"stdio", "streamable-http", "sse"}, p.Transport.Type) {
			bad("packages[%d]: transport must be stdio, streamable-http or sse", i)
		} else if p.Transport.Type != "stdio" && p.Transport.URL == "" {
			bad("packages[%d]: a %s transport needs a url", i, p.Transport.Type)
		}
		if p.RegistryType == "oci" {
			ref, tag, ok := strings.Cut(p.Identifier, ":")
			if !ok || tag != s.Version {
				bad("packages[%d]: the image %q is not tagged with the server's version %s", i, p.Identifier, s.Version)
			}
			if !ociRegistries.MatchString(ref) {
				bad("packages[%d]: the image %q is not on a registry the official MCP Registry accepts", i, p.Identifier)
			}
		}
		if len(p.RuntimeArguments) > 0 && p.RuntimeHint == "" {
			bad("packages[%d]: runtimeArguments without a runtimeHint", i)
		}
		for j, a := range append(slices.Clone(p.RuntimeArguments), p.PackageArguments...) {
			switch a.Type {
			case "named":
				if a.Name == "" {
					bad("packages[%d] argument %d: a named argument needs a name", i, j)
				}
			case "positional":
				if a.Value == "" && a.ValueHint == "" {
					bad("packages[%d] argument %d: a positional argument needs a value or a valueHint", i, j)
				}
			default:
				bad("packages[%d] argument %d: type %q, want named or positional", i, j, a.Type)
			}
			for _, v := range regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`).FindAllStringSubmatch(a.Value, -1) {
				if _, ok := a.Variables[v[1]]; !ok {
					bad("packages[%d] argument %d: {%s} is not one of its variables", i, j, v[1])
				}
			}
		}
	}
	return errors.Join(errs...)
}

func TestServerJSONValidates(t *testing.T) {
	s := loadServerJSON(t)
	if err := validateServerJSON(s); err != nil {
		t.Errorf("server.json:\n%v", err)
	}
	if want := "io.github." + strings.TrimPrefix(goModule(t), "github.com/"); s.Name != want {
		t.Errorf("name %q, want %q: the registry proves an io.github.OWNER name through the GitHub account", s.Name, want)
	}
	if s.Repository == nil || s.Repository.URL != "https://"+goModule(t) || s.Repository.Source != "github" {
		t.Errorf("repository %+v, want https://%s on github", s.Repository, goModule(t))
	}
}

// The validator refuses what the schema refuses: it is no rubber stamp.
func TestValidateServerJSONRefuses(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*serverJSON)
		wantErr string
	}{
		{"bad name", func(s *serverJSON) { s.Name = "jobbridge" }, "name"},
		{"long description", func(s *serverJSON) { s.Description = strings.Repeat("x", 101) }, "description"},
		{"version range", func(s *serverJSON) { s.Version = "^1.0.0" }, "version"},
		{"latest", func(s *serverJSON) { s.Version = "latest" }, "version"},
		{"old schema", func(s *serverJSON) {
			s.Schema = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"
		}, "$schema"},
		{"image tag not the version", func(s *serverJSON) { s.Packages[0].Identifier = "ghcr.io/jobbridge/jobbridge:latest" }, "tagged"},
		{"image on another registry", func(s *serverJSON) { s.Packages[0].Identifier = "quay.io/jobbridge/jobbridge:" + s.Version }, "registry"},
		{"no transport", func(s *serverJSON) { s.Packages[0].Transport = nil }, "transport"},
		{"unknown variable", func(s *serverJSON) { s.Packages[0].RuntimeArguments[0].Variables = nil }, "variables"},
		{"no packages", func(s *serverJSON) { s.Packages = nil }, "neither packages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loadServerJSON(t)
			tt.change(&s)
			err := validateServerJSON(s)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("validateServerJSON = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}

func TestServerJSONHasNoUnknownFields(t *testing.T) {
	b, err := os.ReadFile("../server.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeServerJSON(b); err != nil {
		t.Errorf("server.json: %v (a field this test does not know: check it against the schema, then add it here)", err)
	}
	if _, err := decodeServerJSON([]byte(`{"name":"a/b","registry_type":"oci"}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// A client runs the OCI package as `docker run RUNTIME_ARGS IMAGE
// PACKAGE_ARGS`: the package arguments after the image's entrypoint must be
// a serve command line the binary accepts, with the catalog where the mount
// puts it and the store on the image's volume.
func TestServerJSONRunsARealServe(t *testing.T) {
	p := ociPackage(t, loadServerJSON(t))
	var cmdline []string
	for _, a := range p.PackageArguments {
		if a.Type == "named" {
			cmdline = append(cmdline, a.Name)
		}
		cmdline = append(cmdline, a.Value)
	}
	if len(cmdline) == 0 || cmdline[0] != "serve" {
		t.Fatalf("package arguments %q do not start with serve", cmdline)
	}
	args, err := parseServeArgs(serveFlags(t), cmdline[1:])
	if err != nil {
		t.Fatalf("package arguments %q: %v", cmdline, err)
	}
	if args["stdio"] != "true" {
		t.Errorf("package arguments %q: a stdio transport needs serve --stdio", cmdline)
	}
	img, _ := loadContainerfile(t, containerfiles[0])
	var mounts string
	for _, a := range p.RuntimeArguments {
		mounts += a.Value + " "
	}
	if !strings.Contains(mounts, "dst="+args["config"]) {
		t.Errorf("runtime arguments %q mount nothing at --config %s", mounts, args["config"])
	}
	if !strings.Contains(mounts, ":"+img.Volumes[0]) {
		t.Errorf("runtime arguments %q keep no volume at the image's store %s", mounts, img.Volumes[0])
	}
}
