// Tests of what `make package` and `make image` build, used as an operator
// would: the Debian package is inspected with dpkg-deb, then installed,
// started under systemd and purged inside private namespaces over an
// overlay of the root filesystem (the machine itself is never changed); the
// image's root filesystem is unpacked and intd runs from it.
package deploy_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/intd-project/intd/gen"
)

// The version the artifacts are stamped with, so that the tests can tell
// that a binary reports what make gave it.
const (
	testVersion    = "v9.8.7-test"
	testDebVersion = "9.8.7~test"
	testCommit     = "0123456789abcdef0123456789abcdef01234567"
	testDate       = "2026-01-02T03:04:05Z"
)

var (
	buildOnce sync.Once
	distDir   string
	buildErr  error
)

// dist runs `make package image` once into a temporary directory and
// returns it.
func dist(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if _, err := exec.LookPath("make"); err != nil {
			buildErr = errors.New("make is not installed")
			return
		}
		distDir, buildErr = os.MkdirTemp("", "intd-dist-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("make", "--no-print-directory", "package", "image",
			"DIST="+distDir, "VERSION="+testVersion, "COMMIT="+testCommit, "DATE="+testDate)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("make package image: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return distDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if distDir != "" {
		os.RemoveAll(distDir)
	}
	os.Exit(code)
}

func debFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(dist(t), fmt.Sprintf("intd_%s_%s.deb", testDebVersion, runtime.GOARCH))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("make package did not build %s: %v", filepath.Base(p), err)
	}
	return p
}

func wantVersionOutput(t *testing.T, program string, out []byte) {
	t.Helper()
	want := fmt.Sprintf("%s %s\ncommit: %s\ndate:   %s\ngo:     %s linux/%s\n", program, testVersion, testCommit, testDate, runtime.Version(), runtime.GOARCH)
	if string(out) != want {
		t.Errorf("%s version printed\n%s\nwant\n%s", program, out, want)
	}
}

func TestDebianPackage(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed (Debian package dpkg)")
	}
	deb := debFile(t)
	info, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Version", "Architecture", "Depends").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantInfo := fmt.Sprintf("Package: intd\nVersion: %s\nArchitecture: %s\nDepends: passwd\n", testDebVersion, runtime.GOARCH)
	if string(info) != wantInfo {
		t.Errorf("control fields\n%s\nwant\n%s", info, wantInfo)
	}
	conffiles, err := exec.Command("dpkg-deb", "--info", deb, "conffiles").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(conffiles)), []string{"/etc/default/intcollector", "/etc/default/intd", "/etc/intd/startup.json"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("conffiles %v, want %v", got, want)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		if err := exec.Command("dpkg-deb", "--info", deb, script).Run(); err != nil {
			t.Errorf("no %s maintainer script: %v", script, err)
		}
	}

	// Mode, owner and path of what the package installs.
	contents, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(contents)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		got[strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")] = f[0] + " " + f[1]
	}
	for path, want := range map[string]string{
		"/usr/bin/intd":                                    "-rwxr-xr-x root/root",
		"/usr/bin/intcollector":                            "-rwxr-xr-x root/root",
		"/usr/lib/systemd/system/intd.service":             "-rw-r--r-- root/root",
		"/usr/lib/systemd/system/intcollector.service":     "-rw-r--r-- root/root",
		"/etc/default/intd":                                "-rw-r--r-- root/root",
		"/etc/default/intcollector":                        "-rw-r--r-- root/root",
		"/etc/intd":                                        "drwxr-xr-x root/root",
		"/etc/intd/startup.json":                           "-rw-r--r-- root/root",
		"/var/lib/intd":                                    "drwx------ root/root",
		"/usr/share/doc/intd/copyright":                    "-rw-r--r-- root/root",
		"/usr/share/doc/intd/NOTICE":                       "-rw-r--r-- root/root",
		"/usr/share/doc/intd/install.md":                   "-rw-r--r-- root/root",
		"/usr/share/doc/intd/sonic.md":                     "-rw-r--r-- root/root",
		"/usr/share/doc/intd/examples/soft-dataplane.conf": "-rw-r--r-- root/root",
	} {
		if got[path] != want {
			t.Errorf("%s: %q, want %q", path, got[path], want)
		}
	}

	// The binaries it carries are the stamped static ones.
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "--extract", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
	}
	for _, prog := range []string{"intd", "intcollector"} {
		out, err := exec.Command(filepath.Join(root, "usr/bin", prog), "version").Output()
		if err != nil {
			t.Fatalf("%s version: %v", prog, err)
		}
		wantVersionOutput(t, prog, out)
	}
	if out, _ := exec.Command("file", filepath.Join(root, "usr/bin/intd")).Output(); len(out) > 0 && !bytes.Contains(out, []byte("statically linked")) {
		t.Errorf("intd is not statically linked: %s", out)
	}
}

// TestStartupConfiguration checks that the configuration the package and
// the Kubernetes manifests put in /etc/intd is valid and inert: the node
// is disabled and nothing is watched, so installing changes no traffic.
func TestStartupConfiguration(t *testing.T) {
	b, err := os.ReadFile("package/etc/intd/startup.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gen.ParseConfig(b)
	if err != nil {
		t.Fatalf("startup.json: %v", err)
	}
	n := cfg.GetInt().GetNode().GetConfig()
	if n.Enabled == nil || *n.Enabled {
		t.Error("startup.json does not disable the node")
	}
	if e := cfg.GetInt().GetWatchlist().GetEntries(); e != nil && len(e.Entry) != 0 {
		t.Error("startup.json watches traffic")
	}
	if s := cfg.GetInt().GetIntSessions(); s != nil && len(s.IntSession) != 0 {
		t.Error("startup.json configures INT sessions")
	}
}

// TestImage unpacks the root filesystem of the host platform's image and
// runs intd and intcollector from it, as the image's user where the test
// may chroot.
func TestImage(t *testing.T) {
	archive := filepath.Join(dist(t), "intd_image_linux_"+runtime.GOARCH+".tar")
	dir := t.TempDir()
	untar(t, archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("index.json lists %+v, want one image index named %s", top.Manifests, testVersion)
	}
	platforms, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := platforms.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var img v1.Image
	for _, d := range pm.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			if img, err = platforms.Image(d.Digest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if img == nil {
		t.Fatalf("no linux/%s image in %+v", runtime.GOARCH, pm.Manifests)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/usr/bin/intd" || strings.Join(c.Cmd, " ") != "run" || c.User != "65532:65532" {
		t.Errorf("config: entrypoint %q cmd %q user %q, want /usr/bin/intd, run, 65532:65532", c.Entrypoint, c.Cmd, c.User)
	}
	if cf.Config.Labels["org.opencontainers.image.revision"] != testCommit || cf.Created.UTC().Format("2006-01-02T15:04:05Z") != testDate {
		t.Errorf("revision label %q, created %v", cf.Config.Labels["org.opencontainers.image.revision"], cf.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}

	// The root filesystem, as a runtime would unpack it.
	rootfs := t.TempDir()
	owners := map[string]string{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		owners[name] = fmt.Sprintf("%o %d:%d", h.Mode&0o7777, h.Uid, h.Gid)
		p := filepath.Join(rootfs, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
		if os.Geteuid() == 0 {
			os.Lchown(p, h.Uid, h.Gid)
			os.Chmod(p, os.FileMode(h.Mode)&0o777)
		}
	}
	for path, want := range map[string]string{
		"usr/bin/intd":               "755 0:0",
		"usr/bin/intcollector":       "755 0:0",
		"var/lib/intd":               "700 65532:65532",
		"etc/intd":                   "755 0:0",
		"usr/share/doc/intd/LICENSE": "644 0:0",
		"usr/share/doc/intd/NOTICE":  "644 0:0",
	} {
		if owners[path] != want {
			t.Errorf("image %s: %q, want %q", path, owners[path], want)
		}
	}
	for _, prog := range []string{"intd", "intcollector"} {
		var cmd *exec.Cmd
		if os.Geteuid() == 0 {
			// Inside the image's root filesystem, as its user: nothing
			// of the host (libraries, /etc) is there to lean on.
			cmd = exec.Command("chroot", "--userspec="+c.User, rootfs, "/usr/bin/"+prog, "version")
		} else {
			cmd = exec.Command(filepath.Join(rootfs, "usr/bin", prog), "version")
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s version in the image: %v", prog, err)
		}
		wantVersionOutput(t, prog, out)
	}

	// The same inputs give the same image, byte for byte.
	again := filepath.Join(t.TempDir(), "again.tar")
	cmd := exec.Command("go", "run", "./deploy/image", "-o", again, "-version", testVersion, "-revision", testCommit,
		"-created", testDate, "-platform", "linux/"+runtime.GOARCH+"="+filepath.Join(dist(t), "linux_"+runtime.GOARCH))
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the image again: %v\n%s", err, out)
	}
	a, _ := os.ReadFile(archive)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("building the image twice from the same inputs gave different archives")
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("archive entry %q leaves the directory", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
