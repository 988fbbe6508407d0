//go:build linux

// Package hostlock tells the kernel objects a running intd owns in a
// network namespace (interfaces it attached to, devices it created) from
// the leftovers of one that crashed. The owner binds an abstract unix
// socket named after the object; abstract names belong to the network
// namespace and the kernel releases them when the process exits, however
// it exits (kill -9 included). A later instance that can take the name
// knows the object's owner is gone.
package hostlock

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrHeld is returned by Acquire when a live process holds the name.
var ErrHeld = errors.New("held by another intd")

// Lock is a held name. Release it, or exit, to free it.
type Lock struct {
	mu   sync.Mutex
	fd   int
	name string
}

// Interface is the name of the lock on an attached interface.
func Interface(ifindex int) string { return fmt.Sprintf("intd/if/%d", ifindex) }

func addr(name string) *unix.SockaddrUnix { return &unix.SockaddrUnix{Name: "@" + name} }

// Acquire takes name in the calling thread's network namespace. It fails
// with an error wrapping ErrHeld, naming the holder's process id when it
// can be read, if a live process holds it.
func Acquire(name string) (*Lock, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("hostlock: socket: %w", err)
	}
	if err := unix.Bind(fd, addr(name)); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			if pid := holder(name); pid > 0 {
				return nil, fmt.Errorf("%w (process %d)", ErrHeld, pid)
			}
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("hostlock: bind %s: %w", name, err)
	}
	// Listening lets a contender read the holder's process id
	// (SO_PEERCRED); connections are never accepted.
	if err := unix.Listen(fd, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hostlock: listen %s: %w", name, err)
	}
	return &Lock{fd: fd, name: name}, nil
}

// holder returns the process id holding name, 0 when unknown.
func holder(name string) int {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	if unix.Connect(fd, addr(name)) != nil {
		return 0
	}
	c, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0
	}
	return int(c.Pid)
}

// Held reports whether a live process (this one included) holds name.
// When that cannot be found out it answers true: callers only remove
// objects whose owner is known to be gone.
func Held(name string) bool {
	l, err := Acquire(name)
	if err != nil {
		return true
	}
	l.Release()
	return false
}

// Release frees the name. It may be called more than once.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }
