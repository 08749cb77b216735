package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const kubeDir = "kubernetes"

// object is one Kubernetes object of the manifests.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	// file is the manifest it came from; node is the whole document.
	file string
	node *yaml.Node
}

func (o object) String() string { return o.Kind + "/" + o.Metadata.Name + " (" + o.file + ")" }

// decode decodes the whole object into v.
func (o object) decode(t *testing.T, v any) {
	t.Helper()
	if err := o.node.Decode(v); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
}

type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Generator  []struct {
		Name  string   `yaml:"name"`
		Files []string `yaml:"files"`
	} `yaml:"configMapGenerator"`
}

// manifests is what deploy/kubernetes holds: the objects of the resources
// kustomization.yaml lists, plus the ConfigMaps it generates (with their
// data read from the files it names).
type manifests struct {
	objects []object
	// configMapData is the keys and contents of each generated ConfigMap.
	configMapData map[string]map[string]string
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	var k kustomization
	readYAML(t, filepath.Join(kubeDir, "kustomization.yaml"), &k)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	m := manifests{configMapData: map[string]map[string]string{}}
	for _, res := range k.Resources {
		m.objects = append(m.objects, readObjects(t, filepath.Join(kubeDir, res))...)
	}
	for _, g := range k.Generator {
		data := map[string]string{}
		for _, f := range g.Files {
			key, file, ok := strings.Cut(f, "=")
			if !ok {
				key, file = path.Base(f), f
			}
			b, err := os.ReadFile(filepath.Join(kubeDir, file))
			if err != nil {
				t.Fatalf("configMapGenerator %s: %v", g.Name, err)
			}
			data[key] = string(b)
		}
		m.configMapData[g.Name] = data
		o := object{APIVersion: "v1", Kind: "ConfigMap", file: "kustomization.yaml"}
		o.Metadata.Name = g.Name
		m.objects = append(m.objects, o)
	}
	return m
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// readObjects reads every document of a multi-document manifest.
func readObjects(t *testing.T, file string) []object {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		o := object{file: filepath.Base(file), node: &n}
		if err := n.Decode(&o); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no objects", file)
	}
	return out
}

func (m manifests) find(kind, name string) (object, bool) {
	for _, o := range m.objects {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}

func (m manifests) mustFind(t *testing.T, kind, name string) object {
	t.Helper()
	o, ok := m.find(kind, name)
	if !ok {
		t.Fatalf("the manifests have no %s %q", kind, name)
	}
	return o
}

// The parts of the objects the tests read.
type (
	deployment struct {
		Spec struct {
			Replicas int `yaml:"replicas"`
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	podSpec struct {
		ServiceAccountName string `yaml:"serviceAccountName"`
		SecurityContext    struct {
			RunAsNonRoot *bool `yaml:"runAsNonRoot"`
			RunAsUser    *int  `yaml:"runAsUser"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
		Volumes    []struct {
			Name      string `yaml:"name"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
				ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe  *probe                                       `yaml:"readinessProbe"`
		LivenessProbe   *probe                                       `yaml:"livenessProbe"`
		StartupProbe    *probe                                       `yaml:"startupProbe"`
		Resources       struct{ Requests, Limits map[string]string } `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	}
	keyRef struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	}
	probe struct {
		HTTPGet *struct {
			Path string  `yaml:"path"`
			Port portRef `yaml:"port"`
		} `yaml:"httpGet"`
	}
	service struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string  `yaml:"name"`
				Port       int     `yaml:"port"`
				TargetPort portRef `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	secret struct {
		StringData map[string]string `yaml:"stringData"`
		Data       map[string]string `yaml:"data"`
	}
	podDisruptionBudget struct {
		Spec struct {
			MinAvailable   *int `yaml:"minAvailable"`
			MaxUnavailable *int `yaml:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	networkPolicy struct {
		Spec struct {
			PodSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"podSelector"`
			Ingress []struct {
				Ports []struct {
					Port portRef `yaml:"port"`
				} `yaml:"ports"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
)

// portRef is a port given by number or by name (IntOrString).
type portRef string

func (p *portRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a port is a number or a name", n.Line)
	}
	*p = portRef(n.Value)
	return nil
}

// resolve returns the container port a port reference names.
func (p portRef) resolve(c container) (int, error) {
	for _, cp := range c.Ports {
		if string(p) == cp.Name || string(p) == fmt.Sprint(cp.ContainerPort) {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %q is not a port of container %s", string(p), c.Name)
}

// theDeployment returns the jobbridge Deployment and its server container.
func theDeployment(t *testing.T, m manifests) (deployment, container) {
	t.Helper()
	var d deployment
	m.mustFind(t, "Deployment", "jobbridge").decode(t, &d)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "jobbridge" {
			return d, c
		}
	}
	t.Fatal("the jobbridge Deployment has no container named jobbridge")
	return d, container{}
}

// serveArgs returns the serve flags a container passes, checking that the
// command line is `jobbridge serve FLAGS` with real flags only.
func serveArgs(t *testing.T, c container) map[string]string {
	t.Helper()
	if len(c.Command) > 0 {
		t.Fatalf("container %s overrides the image's entrypoint with %q", c.Name, c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("container %s args %q do not start with serve", c.Name, c.Args)
	}
	args, err := parseServeArgs(serveFlags(t), c.Args[1:])
	if err != nil {
		t.Fatalf("container %s: %v", c.Name, err)
	}
	return args
}

func TestManifestsParseWithKnownKinds(t *testing.T) {
	m := loadManifests(t)
	// Every object the deployment needs, with the apiVersion the Kubernetes
	// API serves it under (the stable one).
	want := []struct{ kind, name, apiVersion string }{
		{"ServiceAccount", "jobbridge", "v1"},
		{"Secret", "jobbridge", "v1"},
		{"ConfigMap", "jobbridge-catalog", "v1"},
		{"Deployment", "jobbridge", "apps/v1"},
		{"Service", "jobbridge", "v1"},
		{"Service", "jobbridge-events", "v1"},
		{"PodDisruptionBudget", "jobbridge", "policy/v1"},
		{"NetworkPolicy", "jobbridge", "networking.k8s.io/v1"},
	}
	for _, w := range want {
		t.Run(w.kind+"/"+w.name, func(t *testing.T) {
			o := m.mustFind(t, w.kind, w.name)
			if o.APIVersion != w.apiVersion {
				t.Errorf("%s: apiVersion %q, want %q", o, o.APIVersion, w.apiVersion)
			}
		})
	}
	if len(m.objects) != len(want) {
		t.Errorf("the manifests hold %d objects, want the %d listed here: %v", len(m.objects), len(want), m.objects)
	}
}

func TestEveryManifestIsAResource(t *testing.T) {
	var k kustomization
	readYAML(t, filepath.Join(kubeDir, "kustomization.yaml"), &k)
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{"kustomization.yaml": true}
	for _, r := range k.Resources {
		listed[r] = true
	}
	for _, g := range k.Generator {
		for _, f := range g.Files {
			_, file, ok := strings.Cut(f, "=")
			if !ok {
				file = f
			}
			listed[file] = true
		}
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not listed in kustomization.yaml: kubectl apply -k would leave it out", f)
		}
	}
}

func TestDeploymentRunsReplicasSafely(t *testing.T) {
	m := loadManifests(t)
	d, c := theDeployment(t, m)
	pod := d.Spec.Template.Spec
	envFromSecret := func(name string) bool {
		for _, e := range c.Env {
			if e.Name == name {
				return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
			}
		}
		return false
	}
	limitsOrRequests := func(res string) bool { return c.Resources.Requests[res] != "" }
	isTrue := func(b *bool) bool { return b != nil && *b }
	tests := []struct {
		what string
		ok   bool
	}{
		{"at least 2 replicas", d.Spec.Replicas >= 2},
		{"the store URL from a Secret (JOBBRIDGE_STORE)", envFromSecret("JOBBRIDGE_STORE")},
		{"the state key from a Secret (JOBBRIDGE_STATE_KEY), shared by the replicas", envFromSecret("JOBBRIDGE_STATE_KEY")},
		{"runAsNonRoot", isTrue(pod.SecurityContext.RunAsNonRoot)},
		{"a non-root runAsUser", pod.SecurityContext.RunAsUser != nil && *pod.SecurityContext.RunAsUser != 0},
		{"readOnlyRootFilesystem", isTrue(c.SecurityContext.ReadOnlyRootFilesystem)},
		{"allowPrivilegeEscalation false", c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation},
		{"every capability dropped", slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"})},
		{"a CPU request", limitsOrRequests("cpu")},
		{"a memory request", limitsOrRequests("memory")},
		{"a memory limit", c.Resources.Limits["memory"] != ""},
		{"a readiness probe on /readyz", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"a liveness probe on /healthz", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz"},
		{"the pod selected by its own selector", mapContains(d.Spec.Template.Metadata.Labels, d.Spec.Selector.MatchLabels) && len(d.Spec.Selector.MatchLabels) > 0},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("Deployment jobbridge: want %s", tt.what)
		}
	}
}

func TestContainerArgsAreServeFlags(t *testing.T) {
	_, c := theDeployment(t, loadManifests(t))
	args := serveArgs(t, c)
	for _, required := range []string{"config", "listen"} {
		if args[required] == "" {
			t.Errorf("container args %q: no --%s", c.Args, required)
		}
	}
	if _, ok := args["stdio"]; ok {
		t.Errorf("container args %q: --stdio in a pod serves nothing", c.Args)
	}
}

func TestContainerPortsAreTheListenAddresses(t *testing.T) {
	_, c := theDeployment(t, loadManifests(t))
	args := serveArgs(t, c)
	tests := []struct{ portName, flag string }{
		{"mcp", "listen"},
		{"events", "events-listen"},
	}
	for _, tt := range tests {
		t.Run(tt.portName, func(t *testing.T) {
			addr, ok := args[tt.flag]
			if !ok {
				t.Fatalf("container args %q: no --%s for port %s", c.Args, tt.flag, tt.portName)
			}
			want, err := portOf(addr)
			if err != nil {
				t.Fatalf("--%s %q: %v", tt.flag, addr, err)
			}
			got, err := portRef(tt.portName).resolve(c)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("container port %s is %d; --%s %s listens on %d", tt.portName, got, tt.flag, addr, want)
			}
		})
	}
	if len(c.Ports) != len(tests) {
		t.Errorf("container declares %d ports, want %d (one per listen flag)", len(c.Ports), len(tests))
	}
}

func TestServicesReachTheirListeners(t *testing.T) {
	m := loadManifests(t)
	d, c := theDeployment(t, m)
	args := serveArgs(t, c)
	tests := []struct {
		service, flag string
	}{
		{"jobbridge", "listen"},
		{"jobbridge-events", "events-listen"},
	}
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			var s service
			m.mustFind(t, "Service", tt.service).decode(t, &s)
			if len(s.Spec.Selector) == 0 || !mapContains(d.Spec.Template.Metadata.Labels, s.Spec.Selector) {
				t.Errorf("Service %s selects %v, which the jobbridge pods (%v) do not carry", tt.service, s.Spec.Selector, d.Spec.Template.Metadata.Labels)
			}
			want, err := portOf(args[tt.flag])
			if err != nil {
				t.Fatalf("--%s %q: %v", tt.flag, args[tt.flag], err)
			}
			if len(s.Spec.Ports) != 1 {
				t.Fatalf("Service %s has %d ports, want 1", tt.service, len(s.Spec.Ports))
			}
			got, err := s.Spec.Ports[0].TargetPort.resolve(c)
			if err != nil {
				t.Fatalf("Service %s: %v", tt.service, err)
			}
			if got != want {
				t.Errorf("Service %s targets port %d; --%s listens on %d", tt.service, got, tt.flag, want)
			}
		})
	}
}

func TestDisruptionBudgetAndPolicySelectTheDeployment(t *testing.T) {
	m := loadManifests(t)
	d, c := theDeployment(t, m)
	labels := d.Spec.Template.Metadata.Labels

	var pdb podDisruptionBudget
	m.mustFind(t, "PodDisruptionBudget", "jobbridge").decode(t, &pdb)
	if !mapContains(labels, pdb.Spec.Selector.MatchLabels) || len(pdb.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("PodDisruptionBudget selects %v, not the jobbridge pods (%v)", pdb.Spec.Selector.MatchLabels, labels)
	}
	switch {
	case pdb.Spec.MinAvailable != nil:
		if *pdb.Spec.MinAvailable < 1 || *pdb.Spec.MinAvailable >= d.Spec.Replicas {
			t.Errorf("PodDisruptionBudget minAvailable %d with %d replicas: want at least 1 and fewer than the replicas (else no node can drain)", *pdb.Spec.MinAvailable, d.Spec.Replicas)
		}
	case pdb.Spec.MaxUnavailable != nil:
		if *pdb.Spec.MaxUnavailable < 1 || *pdb.Spec.MaxUnavailable >= d.Spec.Replicas {
			t.Errorf("PodDisruptionBudget maxUnavailable %d with %d replicas", *pdb.Spec.MaxUnavailable, d.Spec.Replicas)
		}
	default:
		t.Error("PodDisruptionBudget sets neither minAvailable nor maxUnavailable")
	}

	var np networkPolicy
	m.mustFind(t, "NetworkPolicy", "jobbridge").decode(t, &np)
	if !mapContains(labels, np.Spec.PodSelector.MatchLabels) || len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Errorf("NetworkPolicy selects %v, not the jobbridge pods (%v)", np.Spec.PodSelector.MatchLabels, labels)
	}
	allowed := map[int]bool{}
	for _, in := range np.Spec.Ingress {
		for _, p := range in.Ports {
			n, err := p.Port.resolve(c)
			if err != nil {
				t.Errorf("NetworkPolicy: %v", err)
			}
			allowed[n] = true
		}
	}
	for _, p := range c.Ports {
		if !allowed[p.ContainerPort] {
			t.Errorf("NetworkPolicy does not admit port %s (%d), which a Service exposes", p.Name, p.ContainerPort)
		}
	}
}

func TestReferencesResolve(t *testing.T) {
	m := loadManifests(t)
	d, c := theDeployment(t, m)
	pod := d.Spec.Template.Spec

	secretKeys := func(name string) (map[string]string, bool) {
		o, ok := m.find("Secret", name)
		if !ok {
			return nil, false
		}
		var s secret
		o.decode(t, &s)
		keys := maps.Clone(s.StringData)
		if keys == nil {
			keys = map[string]string{}
		}
		maps.Copy(keys, s.Data)
		return keys, true
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			keys, ok := secretKeys(r.Name)
			if !ok {
				t.Errorf("env %s: no Secret %q in the manifests", e.Name, r.Name)
			} else if _, ok := keys[r.Key]; !ok {
				t.Errorf("env %s: Secret %q has no key %q", e.Name, r.Name, r.Key)
			}
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			if _, ok := m.configMapData[r.Name][r.Key]; !ok {
				t.Errorf("env %s: no key %q in a ConfigMap %q of the manifests", e.Name, r.Key, r.Name)
			}
		}
	}
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = true
		switch {
		case v.ConfigMap != nil:
			if _, ok := m.find("ConfigMap", v.ConfigMap.Name); !ok {
				t.Errorf("volume %s: no ConfigMap %q in the manifests", v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil:
			if _, ok := secretKeys(v.Secret.SecretName); !ok {
				t.Errorf("volume %s: no Secret %q in the manifests", v.Name, v.Secret.SecretName)
			}
		}
	}
	for _, vm := range c.VolumeMounts {
		if !volumes[vm.Name] {
			t.Errorf("volume mount %s at %s: no such volume", vm.Name, vm.MountPath)
		}
	}
	if pod.ServiceAccountName != "" {
		if _, ok := m.find("ServiceAccount", pod.ServiceAccountName); !ok {
			t.Errorf("serviceAccountName %q: no such ServiceAccount in the manifests", pod.ServiceAccountName)
		}
	}
}

// catalogOf returns the catalog file the container's --config names, read
// from the ConfigMap mounted there.
func catalogOf(t *testing.T, m manifests, d deployment, c container) (key, content string) {
	t.Helper()
	config := serveArgs(t, c)["config"]
	for _, vm := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			var key string
			switch {
			case vm.SubPath != "" && vm.MountPath == config:
				key = vm.SubPath
			case vm.SubPath == "" && path.Dir(config) == vm.MountPath:
				key = path.Base(config)
			default:
				continue
			}
			data, ok := m.configMapData[v.ConfigMap.Name][key]
			if !ok {
				t.Fatalf("--config %s: ConfigMap %s has no key %q", config, v.ConfigMap.Name, key)
			}
			return key, data
		}
	}
	t.Fatalf("--config %s: no ConfigMap is mounted there", config)
	return "", ""
}

func TestCatalogConfigMapValidatesAndItsSecretsAreSet(t *testing.T) {
	m := loadManifests(t)
	d, c := theDeployment(t, m)
	key, content := catalogOf(t, m, d, c)

	file := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(jobbridgeBin, "validate", file).CombinedOutput()
	if err != nil {
		t.Fatalf("jobbridge validate of the catalog ConfigMap: %v\n%s", err, out)
	}

	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(content), &doc); err != nil {
		t.Fatal(err)
	}
	for _, ref := range envReferences(&doc) {
		if !env[ref] {
			t.Errorf("the catalog references ${%s}, which the container's env does not set", ref)
		}
	}

	// Listening beyond loopback needs an auth: block in the catalog.
	listen := serveArgs(t, c)["listen"]
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("--listen %q: %v", listen, err)
	}
	var cat struct {
		Auth map[string]any `yaml:"auth"`
	}
	if err := yaml.Unmarshal([]byte(content), &cat); err != nil {
		t.Fatal(err)
	}
	if host != "127.0.0.1" && host != "localhost" && cat.Auth == nil {
		t.Errorf("--listen %s is not loopback, and the catalog has no auth: block: serve refuses to start", listen)
	}
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	p, err := portOf(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return p
}

var envReference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// envReferences returns the ${NAME} references in a YAML document's values
// (not its comments), as the catalog loader expands them.
func envReferences(n *yaml.Node) []string {
	var out []string
	if n.Kind == yaml.ScalarNode {
		for _, m := range envReference.FindAllStringSubmatch(n.Value, -1) {
			out = append(out, m[1])
		}
	}
	for _, c := range n.Content {
		out = append(out, envReferences(c)...)
	}
	return out
}

// mapContains reports whether every label of sub is in m with its value.
func mapContains(m, sub map[string]string) bool {
	for k, v := range sub {
		if m[k] != v {
			return false
		}
	}
	return true
}

// kubectl's own Kustomize renders the manifests into the same objects, with
// the generated ConfigMap's hashed name wherever the Deployment refers to
// it. kubectl comes with this project's machines; elsewhere the other
// manifest tests still check the files.
func TestKustomizeRendersTheManifests(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed; the manifest tests above still check the files")
	}
	out, err := exec.Command(kubectl, "kustomize", kubeDir).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", kubeDir, err, exit.Stderr)
		}
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	rendered := manifests{objects: readObjects(t, file)}
	source := loadManifests(t)
	if len(rendered.objects) != len(source.objects) {
		t.Errorf("kubectl kustomize renders %d objects, the files hold %d", len(rendered.objects), len(source.objects))
	}
	var catalogName string
	for _, o := range source.objects {
		if o.Kind == "ConfigMap" {
			for _, r := range rendered.objects {
				if r.Kind == "ConfigMap" && strings.HasPrefix(r.Metadata.Name, o.Metadata.Name+"-") {
					catalogName = r.Metadata.Name
					var cm struct {
						Data map[string]string `yaml:"data"`
					}
					r.decode(t, &cm)
					if !maps.Equal(cm.Data, source.configMapData[o.Metadata.Name]) {
						t.Errorf("rendered ConfigMap %s differs from the files it is generated from", r.Metadata.Name)
					}
				}
			}
			if catalogName == "" {
				t.Errorf("kubectl kustomize renders no ConfigMap %s-HASH", o.Metadata.Name)
			}
			continue
		}
		if _, ok := rendered.find(o.Kind, o.Metadata.Name); !ok {
			t.Errorf("kubectl kustomize does not render %s", o)
		}
	}
	d, c := theDeployment(t, rendered)
	_, srcContainer := theDeployment(t, source)
	if !slices.Equal(c.Args, srcContainer.Args) {
		t.Errorf("rendered args %q, want %q", c.Args, srcContainer.Args)
	}
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			found = true
			if v.ConfigMap.Name != catalogName {
				t.Errorf("rendered Deployment mounts ConfigMap %q, which kubectl kustomize renders as %q", v.ConfigMap.Name, catalogName)
			}
		}
	}
	if !found {
		t.Error("rendered Deployment mounts no ConfigMap")
	}
}
