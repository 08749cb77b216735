package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVersionComesFromTheBuild checks that both spellings print what the
// toolchain recorded in the binary, as "go version -m" reads it: the module
// version and, when the build was stamped from a checkout, the VCS revision,
// its time and whether the tree was modified.
func TestVersionComesFromTheBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "jobbridge")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	recorded, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var want []string
	for _, line := range strings.Split(string(recorded), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			want = append(want, "jobbridge "+f[2]+"\n")
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			want = append(want, "revision "+strings.TrimPrefix(f[1], "vcs.revision="))
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.time="):
			want = append(want, "time     "+strings.TrimPrefix(f[1], "vcs.time="))
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			want = append(want, " (modified)")
		}
	}
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("jobbridge %s: %v", arg, err)
		}
		if !strings.HasPrefix(string(out), want[0]) {
			t.Errorf("jobbridge %s begins %q, want %q", arg, out, want[0])
		}
		for _, w := range want[1:] {
			if !strings.Contains(string(out), w) {
				t.Errorf("jobbridge %s printed no %q:\n%s", arg, w, out)
			}
		}
	}
}

func TestPrintVersion(t *testing.T) {
	tests := []struct {
		info        buildInfo
		want, build string
	}{
		{
			info:  buildInfo{version: "v1.4.0", goVer: "go1.26.8"},
			want:  "jobbridge v1.4.0\ngo       go1.26.8\n",
			build: "v1.4.0",
		},
		{
			info:  buildInfo{version: "(devel)", revision: "930a559c0da22198778ed677008d6679eb32ef46", time: "2026-12-02T09:35:00Z", modified: true, goVer: "go1.26.8"},
			want:  "jobbridge (devel)\nrevision 930a559c0da22198778ed677008d6679eb32ef46 (modified)\ntime     2026-12-02T09:35:00Z\ngo       go1.26.8\n",
			build: "devel-930a559c0da2-dirty",
		},
		{info: buildInfo{version: "(devel)"}, want: "jobbridge (devel)\n", build: "devel"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		printVersion(&out, tt.info)
		if out.String() != tt.want {
			t.Errorf("printVersion(%+v) =\n%s\nwant\n%s", tt.info, out.String(), tt.want)
		}
		if got := tt.info.short(); got != tt.build {
			t.Errorf("short(%+v) = %q, want %q", tt.info, got, tt.build)
		}
	}
}

// TestInstalledDemoRunsAnywhere runs the built binary's demo from an empty
// directory, as a user who ran go install would, and the commands it
// prints, as printed, in a shell that finds jobbridge on PATH.
func TestInstalledDemoRunsAnywhere(t *testing.T) {
	bin := buildBinary(t)
	empty := t.TempDir()
	for _, auth := range []bool{false, true} {
		args := []string{"demo", "--listen", "127.0.0.1:0", "--log-level", "error"}
		if auth {
			args = append(args, "--auth")
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = empty
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.After(30 * time.Second)
		for !strings.Contains(stdout.String(), "Press Ctrl-C to stop") {
			select {
			case err := <-exited:
				t.Fatalf("demo exited: %v\n%s%s", err, stdout.String(), stderr.String())
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("demo never served:\n%s%s", stdout.String(), stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		_, block, _ := strings.Cut(stdout.String(), "Try it from another terminal:\n\n")
		block, _, _ = strings.Cut(block, "\n\n")
		if !strings.Contains(block, "    jobbridge call ") {
			t.Errorf("the demo does not print the installed command:\n%s", block)
		}
		// Run the block as printed, the call without waiting for its task.
		script := strings.Replace(block, "jobbridge call ", "jobbridge call --no-wait ", 1)
		sh := exec.Command("bash", "-e", "-c", script)
		sh.Dir = empty
		sh.Env = cmd.Env
		var out, errOut bytes.Buffer
		sh.Stdout, sh.Stderr = &out, &errOut
		if err := sh.Run(); err != nil {
			t.Errorf("auth=%v: the printed commands failed: %v\n%s\n%s%s", auth, err, script, out.String(), errOut.String())
		} else if !strings.Contains(out.String(), `"taskId"`) || !strings.Contains(out.String(), "build_report") {
			t.Errorf("auth=%v: the printed commands printed:\n%s", auth, out.String())
		}
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("demo ended with %v after an interrupt\n%s", err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Error("demo did not end after an interrupt")
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) > 0 {
		t.Errorf("the demo wrote %d files into the directory it ran in", len(entries))
	}
}
