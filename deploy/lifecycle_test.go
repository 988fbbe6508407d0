package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// machine is systemd booted as PID 1 of private PID, mount, network, UTS,
// IPC and cgroup namespaces, on an overlay whose lower layer is the host's
// root filesystem: everything the package does lands in the upper layer,
// which the test then inspects.
type machine struct {
	dir    string // upper/, work/ and root/ of the overlay
	cgroup string // the cgroup v2 directory holding the machine
	cmd    *exec.Cmd
	pid    int // systemd's PID as the host sees it
	log    bytes.Buffer
}

// bootScript runs inside the new namespaces: $1 is the overlay directory.
const bootScript = `set -e
d=$1 r=$1/root
mount -t overlay overlay -o lowerdir=/,upperdir=$d/upper,workdir=$d/work $r
mount -t proc proc $r/proc
# Most sysctls are not namespaced: the machine may read, not set them.
mount --bind $r/proc/sys $r/proc/sys
mount -o remount,bind,ro $r/proc/sys
mount -t sysfs -o ro sysfs $r/sys
mount -t cgroup2 cgroup2 $r/sys/fs/cgroup
# A /dev of its own (systemd adds /dev/log and others), with the host's
# harmless device nodes.
mount -t tmpfs -o mode=755,nosuid tmpfs $r/dev
for n in null zero full random urandom tty; do
	touch $r/dev/$n
	mount --bind /dev/$n $r/dev/$n
done
touch $r/dev/console
mount --bind /dev/null $r/dev/console
mkdir $r/dev/pts $r/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $r/dev/pts
ln -s pts/ptmx $r/dev/ptmx
mount -t tmpfs tmpfs $r/dev/shm
mount -t tmpfs tmpfs $r/run
mount -t tmpfs tmpfs $r/tmp
cd $r
exec chroot . /usr/bin/env container=intd-test /lib/systemd/systemd --system --unit=basic.target
`

// cgroup2Root is where the cgroup v2 hierarchy is mounted and this
// process's cgroup in it.
func cgroup2Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	mnt := ""
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if ok && strings.HasPrefix(post, "cgroup2 ") {
			mnt = strings.Fields(pre)[4]
			break
		}
	}
	if mnt == "" {
		return "", fmt.Errorf("no cgroup2 mount")
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mnt, rest), nil
		}
	}
	return "", fmt.Errorf("not in a cgroup v2 hierarchy")
}

func bootMachine(t *testing.T) *machine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: booting systemd in private namespaces needs root")
	}
	for tool, pkg := range map[string]string{"unshare": "util-linux", "nsenter": "util-linux", "systemd-analyze": "systemd", "dpkg": "dpkg", "tc": "iproute2"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian package %s)", tool, pkg)
		}
	}
	if _, err := os.Stat("/lib/systemd/systemd"); err != nil {
		t.Skip("systemd not installed (Debian package systemd)")
	}
	base, err := cgroup2Root()
	if err != nil {
		t.Fatalf("cgroup v2: %v", err)
	}
	m := &machine{dir: t.TempDir(), cgroup: filepath.Join(base, fmt.Sprintf("intd-test-%d", os.Getpid()))}
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(m.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(m.cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	// The shell joins the machine's cgroup, which the cgroup namespace
	// then makes the root of the hierarchy systemd sees and manages.
	m.cmd = exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec unshare --cgroup --pid --fork --mount --net --uts --ipc --propagation private sh -c "$2" sh "$3"`,
		"sh", m.cgroup, bootScript, m.dir)
	m.cmd.Stdout, m.cmd.Stderr = &m.log, &m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.stop)
	// systemd is the child unshare forks.
	deadline := time.Now().Add(10 * time.Second)
	for m.pid == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", m.cmd.Process.Pid, m.cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			if comm, _ := os.ReadFile("/proc/" + f[0] + "/comm"); strings.TrimSpace(string(comm)) == "systemd" {
				m.pid, _ = strconv.Atoi(f[0])
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m.pid == 0 {
		t.Fatalf("systemd did not start:\n%s", m.log.String())
	}
	// Until systemd has its private bus socket, systemctl cannot even ask
	// and answers "offline": on a loaded machine that lasts a while.
	for {
		out, err := m.exec("systemctl", "is-system-running", "--wait")
		state := strings.TrimSpace(out)
		if err == nil || state == "degraded" {
			return m
		}
		if time.Now().After(deadline.Add(50 * time.Second)) {
			t.Fatalf("systemd did not boot (%s, %v):\n%s", state, err, m.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exec runs a command inside the machine: its namespaces and root.
func (m *machine) exec(args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(m.pid), "-m", "-p", "-n", "-u", "-i", "-C", "-r", "-w"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (m *machine) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := m.exec(args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// copyIn writes a host file into the machine.
func (m *machine) copyIn(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(m.pid), "-m", "-p", "-r", "-w", "sh", "-c", `cat > "$1"`, "sh", dst)
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copying %s in: %v\n%s", src, err, out)
	}
}

// stop kills the machine (SIGKILL to a namespace's PID 1 ends every
// process in it; systemd ignores SIGTERM) and removes its cgroups.
func (m *machine) stop() {
	if m.cmd == nil {
		return
	}
	if m.pid != 0 {
		syscall.Kill(m.pid, syscall.SIGKILL)
	}
	m.cmd.Process.Kill()
	m.cmd.Wait()
	m.cmd = nil
	// The kernel frees a cgroup's processes asynchronously: retry.
	for i := 0; i < 50; i++ {
		if removeCgroup(m.cgroup) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeCgroup(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroup(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return syscall.Rmdir(dir)
}

// TestPackageLifecycle installs the package under a running systemd,
// checks the units, starts intd on the eBPF dataplane and intcollector
// with the shipped units, then purges, and requires the system to be as
// it was: no file of the package, no user, no state, no enablement left.
func TestPackageLifecycle(t *testing.T) {
	deb := debFile(t)
	m := bootMachine(t)
	m.copyIn(t, deb, "/tmp/intd.deb")
	m.run(t, "dpkg", "--install", "/tmp/intd.deb")

	out := m.run(t, "intd", "version")
	wantVersionOutput(t, "intd", []byte(out))
	if out := m.run(t, "systemd-analyze", "verify", "/usr/lib/systemd/system/intd.service", "/usr/lib/systemd/system/intcollector.service"); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
	if got := m.run(t, "stat", "-c", "%a %U:%G", "/var/lib/intd"); got != "700 intd:intd\n" {
		t.Errorf("/var/lib/intd is %q, want 700 intd:intd", got)
	}
	// Installing starts nothing: attaching to interfaces is for the
	// operator to decide.
	for _, u := range []string{"intd", "intcollector"} {
		if out, _ := m.exec("systemctl", "is-enabled", u); strings.TrimSpace(out) != "disabled" {
			t.Errorf("%s is %q after install, want disabled", u, strings.TrimSpace(out))
		}
		if out, _ := m.exec("systemctl", "is-active", u); strings.TrimSpace(out) != "inactive" {
			t.Errorf("%s is %q after install, want inactive", u, strings.TrimSpace(out))
		}
	}

	// The operator's configuration: two interfaces, the eBPF dataplane.
	m.run(t, "ip", "link", "add", "v1", "type", "veth", "peer", "name", "v2")
	m.run(t, "ip", "link", "set", "v1", "up")
	m.run(t, "ip", "link", "set", "v2", "up")
	m.run(t, "ip", "link", "set", "lo", "up")
	m.run(t, "sh", "-c", `echo 'INTD_ARGS="--dataplane ebpf --interfaces v1,v2 --addr 127.0.0.1:9339 --insecure"' > /etc/default/intd`)
	if out, err := m.exec("systemctl", "start", "intd", "intcollector"); err != nil {
		j, _ := m.exec("journalctl", "--no-pager", "-u", "intd", "-u", "intcollector")
		t.Fatalf("systemctl start intd intcollector: %v\n%s\n%s", err, out, j)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if out, _ := m.exec("tc", "filter", "show", "dev", "v1", "ingress"); strings.Contains(out, "intd_ingress") {
			break
		}
		if time.Now().After(deadline) {
			j, _ := m.exec("journalctl", "--no-pager", "-u", "intd")
			t.Fatalf("intd did not attach its programs to v1 under intd.service:\n%s", j)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pid := strings.TrimSpace(m.run(t, "systemctl", "show", "--property=MainPID", "--value", "intd"))
	status := m.run(t, "cat", "/proc/"+pid+"/status")
	// The unit grants CAP_NET_ADMIN (12), CAP_NET_RAW (13), CAP_PERFMON
	// (38) and CAP_BPF (39) and bounds the process to them; intd may drop
	// some once set up. CAP_NET_RAW only opens the report raw socket at
	// start, so the eBPF dataplane must not keep it.
	const granted = 1<<12 | 1<<13 | 1<<38 | 1<<39
	const netRaw = 1 << 13
	for _, field := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"} {
		var v uint64
		for _, line := range strings.Split(status, "\n") {
			if rest, ok := strings.CutPrefix(line, field+":\t"); ok {
				v, _ = strconv.ParseUint(rest, 16, 64)
			}
		}
		if v&^granted != 0 {
			t.Errorf("intd's %s is %016x, beyond the unit's %016x", field, v, uint64(granted))
		}
		if (field == "CapEff" || field == "CapPrm") && v&netRaw != 0 {
			t.Errorf("intd's %s is %016x: it kept CAP_NET_RAW after start", field, v)
		}
	}
	if !strings.Contains(status, "NoNewPrivs:\t1\n") {
		t.Error("intd runs without no_new_privs")
	}
	if uid := m.run(t, "id", "-u", "intd"); !strings.Contains(status, "Uid:\t"+strings.TrimSpace(uid)+"\t") {
		t.Errorf("intd does not run as the intd user:\n%s", status)
	}
	time.Sleep(time.Second) // a unit that fails after start would show it by now
	for _, u := range []string{"intd", "intcollector"} {
		if out, _ := m.exec("systemctl", "is-active", u); strings.TrimSpace(out) != "active" {
			j, _ := m.exec("journalctl", "--no-pager", "-u", u)
			t.Errorf("%s is %q:\n%s", u, strings.TrimSpace(out), j)
		}
	}

	// What an operator leaves behind: enabled units, a drop-in, a
	// credentials file, a saved configuration.
	m.run(t, "systemctl", "enable", "intd", "intcollector")
	m.run(t, "sh", "-c", "mkdir -p /etc/systemd/system/intd.service.d && cp /usr/share/doc/intd/examples/soft-dataplane.conf /etc/systemd/system/intd.service.d/")
	m.run(t, "sh", "-c", "echo 'admin read-write x' > /etc/intd/credentials && echo '{}' > /var/lib/intd/running.json")

	m.run(t, "dpkg", "--purge", "intd")
	if out, _ := m.exec("tc", "filter", "show", "dev", "v1", "ingress"); strings.Contains(out, "intd") {
		t.Errorf("intd's programs still attached after purge:\n%s", out)
	}
	m.run(t, "ip", "link", "del", "v1")
	m.stop()
	for _, leftover := range leftovers(t, filepath.Join(m.dir, "upper")) {
		t.Errorf("left after purge: %s", leftover)
	}
}

// leftovers lists what the upper layer holds beyond the bookkeeping of
// dpkg and of the booted systemd: files the package or its scripts left,
// files they changed, files they deleted.
func leftovers(t *testing.T, upper string) []string {
	// Must be identical to the host's after purge.
	same := map[string]bool{
		"etc/passwd": true, "etc/group": true, "etc/shadow": true, "etc/gshadow": true,
		"etc/subuid": true, "etc/subgid": true, "var/lib/dpkg/status": true,
	}
	// Changed by any dpkg run or by booting systemd.
	bookkeeping := []string{
		"etc/passwd-", "etc/group-", "etc/shadow-", "etc/gshadow-", "etc/subuid-", "etc/subgid-", "etc/.pwd.lock",
		"etc/machine-id", "etc/mtab",
		"var/lib/dpkg/status-old", "var/lib/dpkg/lock", "var/lib/dpkg/lock-frontend", "var/lib/dpkg/triggers/",
		"var/log/", "var/lib/systemd/", "var/tmp/systemd-private-", "var/cache/",
		"root/.ssh/", // systemd-tmpfiles at boot
	}
	var bad []string
	err := filepath.WalkDir(upper, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, path)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		host, hostErr := os.Lstat("/" + rel)
		if fi.Mode()&fs.ModeCharDevice != 0 && fi.Sys().(*syscall.Stat_t).Rdev == 0 {
			bad = append(bad, "/"+rel+" (deleted from the system)")
			return nil
		}
		if d.IsDir() {
			// systemd-tmpfiles makes /var/lib/private at boot (for any
			// DynamicUser service); what is in it is still checked.
			if rel == "var/lib/private" {
				return nil
			}
			if hostErr != nil || !host.IsDir() {
				for _, b := range bookkeeping {
					if strings.HasPrefix(rel+"/", b) {
						return nil
					}
				}
				bad = append(bad, "/"+rel+"/ (directory)")
				return filepath.SkipDir
			}
			return nil
		}
		if same[rel] {
			a, _ := os.ReadFile(path)
			b, _ := os.ReadFile("/" + rel)
			if !bytes.Equal(a, b) {
				bad = append(bad, "/"+rel+" (changed)")
			}
			return nil
		}
		for _, b := range bookkeeping {
			if rel == b || (strings.HasSuffix(b, "/") || strings.HasSuffix(b, "-")) && strings.HasPrefix(rel, b) {
				return nil
			}
		}
		bad = append(bad, "/"+rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}
