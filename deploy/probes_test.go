package deploy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// runningServer is a `jobbridge serve` of configs/demo.yaml on loopback
// ports, with its MCP listener and its events listener.
type runningServer struct {
	mcp, events string // host:port
}

// freePort returns a loopback address with a port free at the time.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts `jobbridge serve` with the demo catalog, a temporary
// SQLite store and an events listener, and waits until it says it serves. A
// port taken between freePort and the start is tried again with others.
func startServer(t *testing.T) runningServer {
	t.Helper()
	for range 3 {
		s, err := tryStartServer(t)
		if err == nil {
			return s
		}
		if !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Log(err)
	}
	t.Fatal("no free ports for jobbridge serve after 3 tries")
	return runningServer{}
}

func tryStartServer(t *testing.T) (runningServer, error) {
	t.Helper()
	dir := t.TempDir()
	s := runningServer{mcp: freePort(t), events: freePort(t)}
	catalog, err := filepath.Abs("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(catalog)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// The demo catalog's secrets: any values do for serving probes.
	env := os.Environ()
	for _, name := range envReferences(&doc) {
		env = append(env, name+"=probe-test-value-of-some-length")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, jobbridgeBin, "serve",
		"--config", catalog,
		"--listen", s.mcp,
		"--events-listen", s.events,
		"--store", "sqlite:"+filepath.Join(dir, "tasks.db"))
	cmd.Dir = dir
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait() // a signal ends it; its exit status says nothing here
	})

	serving := make(chan struct{})
	var (
		logMu sync.Mutex
		log   strings.Builder
	)
	logged := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return log.String()
	}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			line := sc.Text()
			if !said {
				logMu.Lock()
				log.WriteString(line + "\n")
				logMu.Unlock()
			}
			if !said && strings.Contains(line, "serving MCP") {
				said = true
				close(serving)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-serving:
		return s, nil
	case <-logDone:
		return s, fmt.Errorf("jobbridge serve (%s) ended before serving:\n%s", s, logged())
	case <-time.After(60 * time.Second):
		return s, fmt.Errorf("jobbridge serve (%s) did not say it serves within 60s:\n%s", s, logged())
	}
}

func TestProbesAnswerFromARealServer(t *testing.T) {
	m := loadManifests(t)
	_, c := theDeployment(t, m)
	args := serveArgs(t, c)
	s := startServer(t)
	// The manifests' listen ports, mapped to this server's.
	local := map[int]string{}
	for flag, addr := range map[string]string{"listen": s.mcp, "events-listen": s.events} {
		if v, ok := args[flag]; ok {
			local[mustPort(t, v)] = addr
		}
	}
	probes := []struct {
		name  string
		probe *probe
	}{
		{"readiness", c.ReadinessProbe},
		{"liveness", c.LivenessProbe},
		{"startup", c.StartupProbe},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range probes {
		if p.probe == nil {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			if p.probe.HTTPGet == nil {
				t.Fatalf("%s probe is not an HTTP GET", p.name)
			}
			port, err := p.probe.HTTPGet.Port.resolve(c)
			if err != nil {
				t.Fatal(err)
			}
			addr, ok := local[port]
			if !ok {
				t.Fatalf("%s probe port %d is not a port serve listens on", p.name, port)
			}
			url := "http://" + addr + p.probe.HTTPGet.Path
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s probe: GET %s = %d %q, want 200: the server does not serve the path the manifest probes", p.name, p.probe.HTTPGet.Path, resp.StatusCode, strings.TrimSpace(string(body)))
			}
		})
	}
}

// The events Service reaches the backends' event endpoints, and only them.
func TestEventsListenerServesEventsOnly(t *testing.T) {
	s := startServer(t)
	client := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		method, path string
		want         int
	}{
		// An unsigned delivery reaches the GitHub endpoint and is refused.
		{http.MethodPost, "/events/github", http.StatusUnauthorized},
		{http.MethodPost, "/mcp", http.StatusNotFound},
		{http.MethodGet, "/metrics", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://"+s.events+tt.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s on the events listener = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}
}

func (s runningServer) String() string { return fmt.Sprintf("mcp %s, events %s", s.mcp, s.events) }
