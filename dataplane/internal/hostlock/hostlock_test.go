//go:build linux

package hostlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child process (this test binary) that takes a lock and waits.
func init() {
	if name := os.Getenv("HOSTLOCK_TEST_HOLD"); name != "" {
		if _, err := Acquire(name); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
}

func testName(t *testing.T) string {
	return fmt.Sprintf("intd-test/%d/%s", os.Getpid(), t.Name())
}

func TestAcquireRelease(t *testing.T) {
	name := testName(t)
	l, err := Acquire(name)
	if err != nil {
		t.Fatal(err)
	}
	if !Held(name) {
		t.Error("Held false while held")
	}
	_, err = Acquire(name)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Errorf("second Acquire: %v, want ErrHeld naming process %d", err, os.Getpid())
	}
	l.Release()
	l.Release()
	if Held(name) {
		t.Error("Held true after Release")
	}
	l2, err := Acquire(name)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// TestReleasedByKill checks that the kernel frees the name of a process
// killed with SIGKILL.
func TestReleasedByKill(t *testing.T) {
	name := testName(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HOSTLOCK_TEST_HOLD="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("child: %q", line)
	}
	_, err = Acquire(name)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) {
		t.Fatalf("Acquire while the child holds it: %v, want ErrHeld naming process %d", err, cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	l, err := Acquire(name)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	l.Release()
}
