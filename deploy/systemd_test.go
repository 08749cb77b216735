package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const unitFile = "systemd/jobbridge.service"

// unit is a systemd unit file: each section's keys, each with every value
// it is given (a key may repeat), in order.
type unit map[string]map[string][]string

// parseUnit reads a unit file the way systemd does: [Section] headers,
// Key=Value lines, # and ; comments, a trailing backslash continuing a line.
func parseUnit(data []byte) (unit, error) {
	u := unit{}
	var section string
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	var pending string
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", n, line)
			}
			section = line[1 : len(line)-1]
			if _, dup := u[section]; dup {
				return nil, fmt.Errorf("line %d: section [%s] twice", n, section)
			}
			u[section] = map[string][]string{}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not Key=Value", n, line)
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: %q before any section", n, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	if pending != "" {
		return nil, fmt.Errorf("line %d: continuation at the end of the file", n)
	}
	return u, sc.Err()
}

// last returns the value a key ends up with (the last one given).
func (u unit) last(section, key string) (string, bool) {
	v := u[section][key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func loadUnit(t *testing.T) unit {
	t.Helper()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit(b)
	if err != nil {
		t.Fatalf("%s: %v", unitFile, err)
	}
	return u
}

func TestParseUnit(t *testing.T) {
	tests := []struct {
		name, in string
		want     unit
		wantErr  string
	}{
		{"sections and repeated keys", "# c\n[Unit]\nA=1\n\n[Service]\nB=x\nB=y\nC=\n", unit{"Unit": {"A": {"1"}}, "Service": {"B": {"x", "y"}, "C": {""}}}, ""},
		{"continuation", "[Service]\nExecStart=/bin/a \\\n  --b c\n", unit{"Service": {"ExecStart": {"/bin/a  --b c"}}}, ""},
		{"key before section", "A=1\n", nil, "before any section"},
		{"not key=value", "[Unit]\nnonsense\n", nil, "not Key=Value"},
		{"section twice", "[Unit]\n[Unit]\n", nil, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUnit([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("parseUnit = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSystemdUnitExecStartIsARealServe(t *testing.T) {
	u := loadUnit(t)
	start, ok := u.last("Service", "ExecStart")
	if !ok {
		t.Fatal("no ExecStart")
	}
	fields := strings.Fields(start)
	if len(fields) < 2 || !filepath.IsAbs(fields[0]) || filepath.Base(fields[0]) != "jobbridge" || fields[1] != "serve" {
		t.Fatalf("ExecStart %q is not /PATH/jobbridge serve ...", start)
	}
	args, err := parseServeArgs(serveFlags(t), fields[2:])
	if err != nil {
		t.Fatalf("ExecStart %q: %v", start, err)
	}
	tests := []struct {
		flag, want string
	}{
		{"config", "/etc/jobbridge/catalog.yaml"},
		{"store", "sqlite:/var/lib/jobbridge/tasks.db"},
	}
	for _, tt := range tests {
		if args[tt.flag] != tt.want {
			t.Errorf("ExecStart --%s = %q, want %q", tt.flag, args[tt.flag], tt.want)
		}
	}
	if _, err := portOf(args["listen"]); err != nil {
		t.Errorf("ExecStart --listen %q: %v", args["listen"], err)
	}
}

func TestSystemdUnitSettings(t *testing.T) {
	u := loadUnit(t)
	tests := []struct {
		section, key, want string
	}{
		{"Service", "DynamicUser", "yes"},
		{"Service", "StateDirectory", "jobbridge"},
		{"Service", "ExecReload", "/bin/kill -HUP $MAINPID"},
		{"Service", "EnvironmentFile", "-/etc/jobbridge/jobbridge.env"},
		{"Service", "Restart", "on-failure"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Service", "CapabilityBoundingSet", ""},
		{"Service", "AmbientCapabilities", ""},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "ProtectHome", "yes"},
		{"Service", "PrivateTmp", "yes"},
		{"Service", "PrivateDevices", "yes"},
		{"Service", "ProtectKernelTunables", "yes"},
		{"Service", "ProtectKernelModules", "yes"},
		{"Service", "ProtectControlGroups", "yes"},
		{"Service", "RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"},
		{"Service", "RestrictNamespaces", "yes"},
		{"Service", "RestrictSUIDSGID", "yes"},
		{"Service", "LockPersonality", "yes"},
		{"Service", "MemoryDenyWriteExecute", "yes"},
		{"Service", "SystemCallArchitectures", "native"},
		{"Install", "WantedBy", "multi-user.target"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := u.last(tt.section, tt.key)
			if !ok {
				t.Fatalf("[%s] has no %s (want %s=%s)", tt.section, tt.key, tt.key, tt.want)
			}
			if got != tt.want {
				t.Errorf("[%s] %s=%s, want %s=%s", tt.section, tt.key, got, tt.key, tt.want)
			}
		})
	}
	if filters := u["Service"]["SystemCallFilter"]; !slices.Contains(filters, "@system-service") {
		t.Errorf("SystemCallFilter %q does not allow-list @system-service", filters)
	}
}

// systemd's own reading of the unit, where systemd-analyze is installed: no
// errors and no warnings (an unknown or misspelled key is only a warning).
// ExecStart is pointed at the binary under test, which verify requires to
// exist.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed; the parse tests above still check the unit")
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit(b)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := u.last("Service", "ExecStart")
	installed := strings.Fields(start)[0]
	unitCopy := filepath.Join(t.TempDir(), "jobbridge.service")
	if err := os.WriteFile(unitCopy, bytes.ReplaceAll(b, []byte(installed+" "), []byte(jobbridgeBin+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", unitCopy)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err = cmd.Run()
	if err != nil || strings.TrimSpace(stderr.String()) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, stderr.String())
	}
}
