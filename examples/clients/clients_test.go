package clients

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// entry is one server a snippet configures.
type entry struct {
	file, name string
	command    string
	args       []string
	url        string
	headers    map[string]string
}

func (e entry) String() string { return e.file + ": " + e.name }

// jsonEntries reads the servers of a JSON snippet: under "mcpServers"
// (Claude Desktop, Claude Code's .mcp.json, Cursor) or "servers" (VS Code).
func jsonEntries(t *testing.T, file string) []entry {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type server struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Env     map[string]string `json:"env"`
	}
	var doc struct {
		MCPServers map[string]server `json:"mcpServers"`
		Servers    map[string]server `json:"servers"`
		Inputs     []struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			Description string `json:"description"`
			Password    bool   `json:"password"`
		} `json:"inputs"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	servers := doc.MCPServers
	if servers == nil {
		servers = doc.Servers
	}
	if len(servers) == 0 {
		t.Fatalf("%s configures no server", file)
	}
	var out []entry
	for name, s := range servers {
		if (s.Command == "") == (s.URL == "") {
			t.Errorf("%s: %s has both or neither of command and url", file, name)
		}
		if s.Type != "" && s.Type != "stdio" && s.Type != "http" {
			t.Errorf("%s: %s has type %q", file, name, s.Type)
		}
		out = append(out, entry{file: file, name: name, command: s.Command, args: s.Args, url: s.URL, headers: s.Headers})
	}
	return out
}

// shellEntries reads the `claude mcp add` lines of a shell snippet.
func shellEntries(t *testing.T, file string) []entry {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "claude mcp add ")
		if !ok {
			continue
		}
		e := entry{file: file, headers: map[string]string{}}
		words := splitWords(t, rest)
		var positional []string
		for i := 0; i < len(words); i++ {
			switch w := words[i]; {
			case w == "--":
				e.command, e.args = words[i+1], words[i+2:]
				i = len(words)
			case w == "--transport" || w == "-t", w == "-s" || w == "--scope":
				i++
			case w == "--header" || w == "-H":
				k, v, _ := strings.Cut(words[i+1], ":")
				e.headers[k] = strings.TrimSpace(v)
				i++
			default:
				positional = append(positional, w)
			}
		}
		e.name = positional[0]
		if len(positional) > 1 {
			e.url = positional[1]
		}
		out = append(out, e)
	}
	return out
}

// splitWords splits as a shell does for the snippets: blanks separate,
// double quotes quote.
func splitWords(t *testing.T, s string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		in, q bool
	)
	for _, r := range s {
		switch {
		case r == '"':
			q, in = !q, true
		case r == ' ' && !q:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if q {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func allEntries(t *testing.T) []entry {
	t.Helper()
	var out []entry
	files, _ := filepath.Glob("*.json")
	for _, f := range files {
		out = append(out, jsonEntries(t, f)...)
	}
	out = append(out, shellEntries(t, "claude-code.sh")...)
	for _, want := range []string{"claude-desktop.json", "claude-code.sh", "claude-code.mcp.json", "vscode.mcp.json", "cursor.mcp.json"} {
		found := false
		for _, e := range out {
			found = found || e.file == want
		}
		if !found {
			t.Errorf("no server in %s", want)
		}
	}
	return out
}

// placeholder matches the catalog path a user fills in.
var placeholder = regexp.MustCompile(`^(/ABSOLUTE/PATH/TO|\$\{workspaceFolder\})/catalog\.yaml$`)

// variable matches the variables the clients expand in headers.
var variable = regexp.MustCompile(`\$\{[^}]+\}`)

func buildJobbridge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jobbridge")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/jobbridge").CombinedOutput(); err != nil {
		t.Fatalf("building jobbridge: %v\n%s", err, out)
	}
	return bin
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"snippet-test","version":"1"}}}`

// TestSnippetsStartTheirServers starts each stdio server a snippet names,
// as the client would (the command with its arguments, the catalog path
// filled in), and completes an initialize with it; each HTTP server's URL
// is the MCP endpoint of a running jobbridge serve, which answers an
// initialize sent with the snippet's headers.
func TestSnippetsStartTheirServers(t *testing.T) {
	entries := allEntries(t)
	bin := buildJobbridge(t)
	catalog, err := filepath.Abs("../../configs/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_STATE_HOME=")
	httpURL := startServe(t, bin, catalog, env)
	for _, e := range entries {
		if e.command == "" {
			continue
		}
		t.Run("stdio "+e.String(), func(t *testing.T) {
			if filepath.Base(e.command) != "jobbridge" {
				t.Fatalf("command %q is not jobbridge", e.command)
			}
			args := make([]string, len(e.args))
			for i, a := range e.args {
				args[i] = placeholder.ReplaceAllString(a, catalog)
			}
			if args[0] == "serve" && !containsAll(args, "--stdio", "--config") || args[0] == "demo" && !containsAll(args, "--stdio") {
				t.Fatalf("args %q do not serve stdio", e.args)
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir, cmd.Env = t.TempDir(), env
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			io.WriteString(stdin, initialize+"\n")
			lines := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				sc.Buffer(nil, 1<<20)
				if sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			select {
			case line := <-lines:
				if !strings.Contains(line, `"serverInfo"`) {
					t.Errorf("initialize answered %q\n%s", line, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer to initialize\n%s", stderr.String())
			}
			stdin.Close()
		})
	}
	for _, e := range entries {
		if e.url == "" {
			continue
		}
		t.Run("http "+e.String(), func(t *testing.T) {
			u, err := url.Parse(e.url)
			if err != nil || u.Path != "/mcp" || (u.Scheme != "http" && u.Scheme != "https") {
				t.Fatalf("url %q is not a jobbridge MCP endpoint", e.url)
			}
			if u.Hostname() != "127.0.0.1" {
				return // a deployment's address: checked above for its shape only
			}
			if u.Port() != "8080" {
				t.Errorf("url %q is not serve's default listen address", e.url)
			}
			req, _ := http.NewRequest(http.MethodPost, httpURL, strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range e.headers {
				req.Header.Set(k, variable.ReplaceAllString(v, "test-token"))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"serverInfo"`) {
				t.Errorf("initialize: %s %s", resp.Status, body)
			}
		})
	}
}

// startServe runs jobbridge serve on a free port until the test ends and
// returns its endpoint.
func startServe(t *testing.T, bin, catalog string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", catalog, "--listen", "127.0.0.1:0", "--store", "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"))
	cmd.Env = env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://\S+/mcp)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("%s serve never listened", bin)
		return ""
	}
}

func containsAll(args []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, a := range args {
			found = found || a == w
		}
		if !found {
			return false
		}
	}
	return true
}
