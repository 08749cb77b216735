package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The two ways to build the image: offline from a binary built beforehand
// (what `make image-test` builds), and from source in a builder stage.
var containerfiles = []string{"Containerfile", "Containerfile.multistage"}

// instruction is one Containerfile instruction.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// parseContainerfile reads the instructions of a Containerfile (Dockerfile
// syntax): comments and blank lines dropped, continuation lines joined.
func parseContainerfile(data []byte) ([]instruction, error) {
	var out []instruction
	sc := bufio.NewScanner(bytes.NewReader(data))
	n, start := 0, 0
	var pending strings.Builder
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending.Len() == 0) {
			continue
		}
		if pending.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(body + " ")
			continue
		}
		pending.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(pending.String()), " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		pending.Reset()
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("line %d: continuation at the end of the file", start)
	}
	return out, sc.Err()
}

// imageConfig is what the final stage of a Containerfile gives the image.
type imageConfig struct {
	From       string
	Args       []string
	Labels     map[string]string
	Env        map[string]string
	User       string
	Workdir    string
	Volumes    []string
	Expose     []string
	Entrypoint []string
	Cmd        []string
	// Copies maps each COPY destination to its --chown (empty: root).
	Copies map[string]string
}

// finalStage returns the image config of a Containerfile's last stage and
// the FROM lines of all its stages.
func finalStage(instrs []instruction) (imageConfig, []string, error) {
	var froms []string
	var c imageConfig
	for _, in := range instrs {
		var err error
		switch in.cmd {
		case "FROM":
			froms = append(froms, in.args)
			c = imageConfig{From: in.args, Labels: map[string]string{}, Env: map[string]string{}, Copies: map[string]string{}}
		case "ARG":
			name, _, _ := strings.Cut(in.args, "=")
			c.Args = append(c.Args, name)
		case "LABEL", "ENV":
			var words []string
			words, err = splitWords(in.args)
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					err = fmt.Errorf("line %d: %s %q is not KEY=VALUE", in.line, in.cmd, w)
					break
				}
				if in.cmd == "LABEL" {
					c.Labels[k] = v
				} else {
					c.Env[k] = v
				}
			}
		case "USER":
			c.User = in.args
		case "WORKDIR":
			c.Workdir = in.args
		case "VOLUME":
			err = json.Unmarshal([]byte(in.args), &c.Volumes)
		case "EXPOSE":
			c.Expose = strings.Fields(in.args)
		case "ENTRYPOINT":
			err = json.Unmarshal([]byte(in.args), &c.Entrypoint)
		case "CMD":
			err = json.Unmarshal([]byte(in.args), &c.Cmd)
		case "COPY":
			fields := strings.Fields(in.args)
			chown := ""
			for _, f := range fields {
				if v, ok := strings.CutPrefix(f, "--chown="); ok {
					chown = v
				}
			}
			c.Copies[path.Clean(fields[len(fields)-1])] = chown
		}
		if err != nil {
			return imageConfig{}, nil, fmt.Errorf("line %d: %s: %w", in.line, in.cmd, err)
		}
	}
	if len(froms) == 0 {
		return imageConfig{}, nil, fmt.Errorf("no FROM")
	}
	return c, froms, nil
}

// splitWords splits on spaces outside double quotes and removes the quotes.
func splitWords(s string) ([]string, error) {
	var out []string
	var w strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"':
			inQuote, have = !inQuote, true
		case ch == '\\' && inQuote && i+1 < len(s):
			i++
			w.WriteByte(s[i])
		case ch == ' ' && !inQuote:
			if have {
				out = append(out, w.String())
				w.Reset()
				have = false
			}
		default:
			w.WriteByte(ch)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if have {
		out = append(out, w.String())
	}
	return out, nil
}

func loadContainerfile(t *testing.T, file string) (imageConfig, []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	instrs, err := parseContainerfile(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	c, froms, err := finalStage(instrs)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c, froms
}

func TestParseContainerfile(t *testing.T) {
	in := "# comment\nFROM scratch\nLABEL a=\"x y\" \\\n      b=z\nENV K=v\nUSER 1:1\nENTRYPOINT [\"/bin/x\"]\nCMD [\"serve\"]\nVOLUME [\"/data\"]\nCOPY --chown=1:1 s/ /data/\n"
	instrs, err := parseContainerfile([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, froms, err := finalStage(instrs)
	if err != nil {
		t.Fatal(err)
	}
	want := imageConfig{
		From: "scratch", Labels: map[string]string{"a": "x y", "b": "z"}, Env: map[string]string{"K": "v"},
		User: "1:1", Volumes: []string{"/data"}, Entrypoint: []string{"/bin/x"}, Cmd: []string{"serve"},
		Copies: map[string]string{"/data": "1:1"},
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(froms, []string{"scratch"}) {
		t.Errorf("finalStage = %+v (froms %q), want %+v", got, froms, want)
	}
	for _, bad := range []string{"FROM scratch\nLABEL a=\"x\n", "FROM scratch\nCMD serve --x\n", "FROM scratch\nRUN a \\\n"} {
		instrs, err := parseContainerfile([]byte(bad))
		if err == nil {
			_, _, err = finalStage(instrs)
		}
		if err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The two Containerfiles give the image the same final stage.
func TestContainerfilesAgree(t *testing.T) {
	offline, _ := loadContainerfile(t, containerfiles[0])
	multi, _ := loadContainerfile(t, containerfiles[1])
	if !reflect.DeepEqual(offline, multi) {
		t.Errorf("the final stages differ:\n%s: %+v\n%s: %+v", containerfiles[0], offline, containerfiles[1], multi)
	}
}

func TestContainerfileImage(t *testing.T) {
	module := goModule(t)
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	sj := loadServerJSON(t)
	for _, file := range containerfiles {
		t.Run(file, func(t *testing.T) {
			c, _ := loadContainerfile(t, file)
			if c.From != "scratch" {
				t.Errorf("final stage FROM %s, want scratch: nothing but the binary and the certificates", c.From)
			}

			uid, gid, ok := strings.Cut(c.User, ":")
			if n, err := strconv.Atoi(uid); err != nil || n == 0 || !ok {
				t.Errorf("USER %q: want a numeric non-root UID:GID (Kubernetes' runAsNonRoot checks a number)", c.User)
			} else if _, err := strconv.Atoi(gid); err != nil {
				t.Errorf("USER %q: GID is not numeric", c.User)
			}

			if len(c.Entrypoint) != 1 {
				t.Fatalf("ENTRYPOINT %q: want the binary alone", c.Entrypoint)
			}
			if _, ok := c.Copies[c.Entrypoint[0]]; !ok {
				t.Errorf("ENTRYPOINT %s is not a file the Containerfile copies", c.Entrypoint[0])
			}
			for _, want := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/passwd"} {
				if _, ok := c.Copies[want]; !ok {
					t.Errorf("the image has no %s", want)
				}
			}
			if len(c.Copies) != 5 {
				t.Errorf("the image copies in %d paths (%v), want 5: the binary, the certificates, passwd, group and the store directory", len(c.Copies), c.Copies)
			}

			if len(c.Cmd) == 0 || c.Cmd[0] != "serve" {
				t.Fatalf("CMD %q does not start with serve", c.Cmd)
			}
			args, err := parseServeArgs(serveFlags(t), c.Cmd[1:])
			if err != nil {
				t.Fatalf("CMD %q: %v", c.Cmd, err)
			}
			port, err := portOf(args["listen"])
			if err != nil {
				t.Fatalf("CMD --listen %q: %v", args["listen"], err)
			}
			if !reflect.DeepEqual(c.Expose, []string{strconv.Itoa(port)}) {
				t.Errorf("EXPOSE %q, want the --listen port %d", c.Expose, port)
			}

			storePath, ok := strings.CutPrefix(c.Env["JOBBRIDGE_STORE"], "sqlite:")
			if !ok {
				t.Fatalf("ENV JOBBRIDGE_STORE=%q, want sqlite:PATH on the volume", c.Env["JOBBRIDGE_STORE"])
			}
			if len(c.Volumes) != 1 || path.Dir(storePath) != c.Volumes[0] {
				t.Errorf("VOLUME %q does not hold the store %s", c.Volumes, storePath)
			}
			if c.Copies[path.Dir(storePath)] != c.User {
				t.Errorf("the store directory %s is owned by %q, not the image's user %s", path.Dir(storePath), c.Copies[path.Dir(storePath)], c.User)
			}

			labels := []struct{ key, want string }{
				{"org.opencontainers.image.source", "https://" + module},
				{"org.opencontainers.image.licenses", "Apache-2.0"},
				{"org.opencontainers.image.version", "${VERSION}"},
				{"org.opencontainers.image.revision", "${REVISION}"},
				{"org.opencontainers.image.title", "jobbridge"},
				// The MCP Registry checks this label to verify who owns an
				// OCI package; it must be the server.json name.
				{"io.modelcontextprotocol.server.name", sj.Name},
			}
			for _, l := range labels {
				if got := c.Labels[l.key]; got != l.want {
					t.Errorf("LABEL %s=%q, want %q", l.key, got, l.want)
				}
			}
			for _, arg := range []string{"VERSION", "REVISION"} {
				if !strings.Contains(strings.Join(c.Args, " "), arg) {
					t.Errorf("no ARG %s in the final stage for its label", arg)
				}
			}
			if !bytes.Contains(license[:200], []byte("Apache License")) || !bytes.Contains(license[:200], []byte("Version 2.0")) {
				t.Error("LICENSE is not the Apache License 2.0 the licenses label names")
			}
		})
	}
}

func TestMultistageBuildsAStaticBinaryWithTheModulesGo(t *testing.T) {
	b, err := os.ReadFile("Containerfile.multistage")
	if err != nil {
		t.Fatal(err)
	}
	instrs, err := parseContainerfile(b)
	if err != nil {
		t.Fatal(err)
	}
	_, froms, err := finalStage(instrs)
	if err != nil {
		t.Fatal(err)
	}
	goVersion := goDirective(t)
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "docker.io/library/golang:"+goVersion+"-") {
		t.Errorf("stages %q: want a golang:%s builder, then the final stage", froms, goVersion)
	}
	built := false
	for _, in := range instrs {
		if in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=0 go build") && strings.Contains(in.args, "./cmd/jobbridge") {
			built = true
		}
	}
	if !built {
		t.Error("no RUN CGO_ENABLED=0 go build ... ./cmd/jobbridge: the binary would not be static")
	}
}

// The Deployment runs the image the registry entry names, as the image's user.
func TestDeploymentRunsTheImage(t *testing.T) {
	d, c := theDeployment(t, loadManifests(t))
	img, _ := loadContainerfile(t, containerfiles[0])
	uid, _, _ := strings.Cut(img.User, ":")
	if u := d.Spec.Template.Spec.SecurityContext.RunAsUser; u == nil || strconv.Itoa(*u) != uid {
		t.Errorf("Deployment runAsUser %v, want the image's user %s", u, uid)
	}
	if want := ociPackage(t, loadServerJSON(t)).Identifier; c.Image != want {
		t.Errorf("Deployment image %s, want the one server.json publishes, %s", c.Image, want)
	}
}

// goModule returns the module path of ../go.mod.
func goModule(t *testing.T) string {
	t.Helper()
	return goModLine(t, "module ")
}

// goDirective returns the go version of ../go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	return goModLine(t, "go ")
}

func goModLine(t *testing.T, prefix string) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("go.mod has no %q line", prefix)
	return ""
}
