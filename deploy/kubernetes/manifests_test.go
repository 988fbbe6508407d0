// Package kubernetes_test decodes every manifest of deploy/kubernetes
// strictly with the Kubernetes API types (an unknown or misspelt field
// fails) and checks what the manifests promise against intd and
// intcollector themselves: ports, capabilities, configuration paths.
package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization these manifests
// use; decoding strictly into it refuses anything else.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

type objects struct {
	namespaces  []*corev1.Namespace
	configMaps  map[string]*corev1.ConfigMap
	daemonSets  map[string]*appsv1.DaemonSet
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
}

// load decodes every document of every file kustomization.yaml lists.
func load(t *testing.T) (*kustomization, *objects) {
	t.Helper()
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	// Every manifest in the directory is a resource of the kustomization.
	files, _ := filepath.Glob("*.yaml")
	var listed []string
	listed = append(listed, k.Resources...)
	listed = append(listed, "kustomization.yaml")
	sort.Strings(files)
	sort.Strings(listed)
	if !slices.Equal(files, listed) {
		t.Errorf("manifests %v, kustomization.yaml lists %v", files, k.Resources)
	}

	o := &objects{
		configMaps:  map[string]*corev1.ConfigMap{},
		daemonSets:  map[string]*appsv1.DaemonSet{},
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
	}
	for _, f := range k.Resources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var obj interface{ GetNamespace() string }
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				ns := &corev1.Namespace{}
				o.namespaces = append(o.namespaces, ns)
				obj = ns
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "apps/v1 DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "apps/v1 Deployment":
				obj = &appsv1.Deployment{}
			case "v1 Service":
				obj = &corev1.Service{}
			default:
				t.Fatalf("%s document %d: unexpected %s %s", f, i, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, tm.Kind, err)
			}
			if ns := obj.GetNamespace(); ns != "" && ns != k.Namespace {
				t.Errorf("%s: %s in namespace %q, the kustomization sets %q", f, tm.Kind, ns, k.Namespace)
			}
			switch v := obj.(type) {
			case *corev1.ConfigMap:
				o.configMaps[v.Name] = v
			case *appsv1.DaemonSet:
				o.daemonSets[v.Name] = v
			case *appsv1.Deployment:
				o.deployments[v.Name] = v
			case *corev1.Service:
				o.services[v.Name] = v
			}
		}
	}
	if len(o.namespaces) != 1 || o.namespaces[0].Name != k.Namespace {
		t.Errorf("want one Namespace %q", k.Namespace)
	}
	return &k, o
}

// defaults builds the command and reads the default addresses of the named
// flags from its -h output (flag.PrintDefaults), e.g. `(default ":9339")`.
func defaults(t *testing.T, pkg string, args []string, flags ...string) map[string]string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, "./"+pkg)
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	out, _ := exec.Command(bin, args...).CombinedOutput()
	lines := strings.Split(string(out), "\n")
	port := regexp.MustCompile(`:(\d+)\b`)
	got := map[string]string{}
	for _, f := range flags {
		for i, l := range lines {
			if (strings.HasPrefix(l, "  -"+f+" ") || l == "  -"+f) && i+1 < len(lines) {
				if m := port.FindStringSubmatch(lines[i+1]); m != nil {
					got[f] = m[1]
				}
			}
		}
		if got[f] == "" {
			t.Fatalf("%s %v shows no default port for -%s:\n%s", pkg, args, f, out)
		}
	}
	return got
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

func TestIntdDaemonSet(t *testing.T) {
	_, o := load(t)
	ds := o.daemonSets["intd"]
	if ds == nil {
		t.Fatal("no DaemonSet intd")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("intd does not run in the node's network namespace (hostNetwork)")
	}
	if spec.NodeSelector["intd/enabled"] != "true" {
		t.Error("the DaemonSet is not opt-in per node (nodeSelector intd/enabled)")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("no securityContext capabilities")
	}
	var add []string
	for _, cp := range sc.Capabilities.Add {
		add = append(add, string(cp))
	}
	sort.Strings(add)
	if !slices.Equal(add, []string{"BPF", "NET_ADMIN", "PERFMON"}) || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities add %v drop %v, want exactly BPF, NET_ADMIN, PERFMON over ALL dropped", add, sc.Capabilities.Drop)
	}
	if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("intd is privileged, may escalate, or has a writable root filesystem")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path != "/var/lib/intd" {
			t.Errorf("host path %s mounted; intd needs only its state directory", v.HostPath.Path)
		}
	}

	// The settings file and startup configuration come from the ConfigMap
	// mounted where the arguments say.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	var cmName string
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && mounts[v.Name] == "/etc/intd" {
			cmName = v.ConfigMap.Name
		}
		if v.HostPath != nil && mounts[v.Name] != "/var/lib/intd" {
			t.Errorf("state directory mounted at %q, want /var/lib/intd", mounts[v.Name])
		}
	}
	cm := o.configMaps[cmName]
	if cm == nil {
		t.Fatalf("no ConfigMap mounted at /etc/intd")
	}
	i := slices.Index(c.Args, "--config")
	if len(c.Args) < 3 || c.Args[0] != "run" || i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %q: want run --config FILE", c.Args)
	}
	settingsKey, ok := strings.CutPrefix(c.Args[i+1], "/etc/intd/")
	if !ok || cm.Data[settingsKey] == "" {
		t.Fatalf("--config %s is not a key of ConfigMap %s", c.Args[i+1], cm.Name)
	}
	var settings map[string]any
	dec := json.NewDecoder(strings.NewReader(cm.Data[settingsKey]))
	if err := dec.Decode(&settings); err != nil {
		t.Fatalf("%s: %v", settingsKey, err)
	}
	if settings["dataplane"] != "ebpf" {
		t.Errorf("dataplane %v: the capabilities granted are the eBPF dataplane's", settings["dataplane"])
	}
	startupKey, ok := strings.CutPrefix(fmt.Sprint(settings["startup-config"]), "/etc/intd/")
	if !ok || cm.Data[startupKey] == "" {
		t.Errorf("startup-config %v is not a key of ConfigMap %s", settings["startup-config"], cm.Name)
	}
	pkgStartup, err := os.ReadFile("../package/etc/intd/startup.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[startupKey] != string(pkgStartup) {
		t.Error("the ConfigMap's startup.json differs from the package's (deploy/package/etc/intd/startup.json), whose inertness deploy tests check")
	}

	// The gNMI port: intd's default, the settings' and the container's.
	want := defaults(t, "cmd/intd", []string{"run", "-h"}, "addr")["addr"]
	if p := portOf(t, fmt.Sprint(settings["addr"])); p != want {
		t.Errorf("settings addr port %s, intd's default is %s", p, want)
	}
	if len(c.Ports) != 1 || fmt.Sprint(c.Ports[0].ContainerPort) != want || c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("container ports %+v, want gNMI on TCP %s", c.Ports, want)
	}
}

func TestIntcollector(t *testing.T) {
	_, o := load(t)
	d := o.deployments["intcollector"]
	svc := o.services["intcollector"]
	if d == nil || svc == nil {
		t.Fatal("no Deployment or Service intcollector")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Error("intcollector keeps flow state in the process: one replica")
	}
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 {
		t.Error("intcollector does not run as the image's non-root user 65532")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Add) != 0 ||
		!slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("intcollector must drop every capability")
	}
	if !slices.Equal(c.Command, []string{"/usr/bin/intcollector"}) {
		t.Errorf("command %q", c.Command)
	}

	// Ports: intcollector's defaults, given explicitly so that they listen
	// on the pod's address, match the container's and the Service's.
	def := defaults(t, "cmd/intcollector", []string{"-h"}, "listen", "metrics", "gnmi")
	proto := map[string]corev1.Protocol{"listen": corev1.ProtocolUDP, "metrics": corev1.ProtocolTCP, "gnmi": corev1.ProtocolTCP}
	byPort := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		byPort[fmt.Sprint(p.ContainerPort)] = p
	}
	for flag, port := range def {
		i := slices.Index(c.Args, "--"+flag)
		if i < 0 || i+1 >= len(c.Args) {
			t.Errorf("args %q lack --%s", c.Args, flag)
			continue
		}
		if p := portOf(t, c.Args[i+1]); p != port {
			t.Errorf("--%s %s: port %s, intcollector's default is %s", flag, c.Args[i+1], p, port)
		}
		cp, ok := byPort[port]
		if !ok || cp.Protocol != proto[flag] {
			t.Errorf("no %s container port %s for --%s", proto[flag], port, flag)
		}
	}
	if len(c.Ports) != len(def) {
		t.Errorf("%d container ports, want %d", len(c.Ports), len(def))
	}

	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the pods", k, v)
		}
	}
	if len(svc.Spec.Ports) != len(c.Ports) {
		t.Errorf("Service has %d ports, the container %d", len(svc.Spec.Ports), len(c.Ports))
	}
	for _, sp := range svc.Spec.Ports {
		var found bool
		for _, cp := range c.Ports {
			if sp.TargetPort.String() == cp.Name && sp.Protocol == cp.Protocol && sp.Port == cp.ContainerPort {
				found = true
			}
		}
		if !found {
			t.Errorf("Service port %s (%d/%s -> %s) matches no container port", sp.Name, sp.Port, sp.Protocol, sp.TargetPort.String())
		}
	}
}

// TestStrictDecoding makes sure the decoding above would catch a typo.
func TestStrictDecoding(t *testing.T) {
	b, err := os.ReadFile("intd-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(b, []byte("hostNetwork: true"), []byte("hostNetworking: true"), 1)
	if bytes.Equal(b, bad) {
		t.Fatal("intd-daemonset.yaml has no hostNetwork: true")
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(bad, &ds); err == nil {
		t.Error("a misspelt field decoded without error")
	}
}
