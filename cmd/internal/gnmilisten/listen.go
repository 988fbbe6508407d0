// Package gnmilisten holds the gNMI listener settings intd run and
// intcollector share: TLS (given or a kept self-signed certificate),
// mutual TLS, credentials, and the rule that an unauthenticated or
// plaintext server stays on loopback.
package gnmilisten

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/intd-project/intd/server"
)

// Settings are a command's gNMI listener flags.
type Settings struct {
	Addr                 string `json:"addr"`
	TLSCert              string `json:"tls-cert"`
	TLSKey               string `json:"tls-key"`
	TLSClientCA          string `json:"tls-client-ca"`
	Insecure             bool   `json:"insecure"`
	Credentials          string `json:"credentials"`
	AllowUnauthenticated bool   `json:"allow-unauthenticated"`
	StateDir             string `json:"state-dir"`
}

// Authenticated reports whether clients must prove who they are.
func (s *Settings) Authenticated() bool { return s.Credentials != "" || s.TLSClientCA != "" }

// IsLoopback reports whether a listen address binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Check refuses settings that would expose the server: plaintext, or no
// authentication, beyond loopback. addrFlag names the address flag and
// defaultAddr its loopback default, for the messages; risk says what an
// unauthenticated client could do ("reconfigure this node").
func (s *Settings) Check(log *slog.Logger, addrFlag, defaultAddr, risk string) error {
	if s.Insecure {
		if !IsLoopback(s.Addr) {
			return fmt.Errorf("--insecure is only allowed on a loopback address, not %q", s.Addr)
		}
		if s.TLSCert != "" || s.TLSKey != "" || s.TLSClientCA != "" {
			return errors.New("--insecure conflicts with the --tls-* flags")
		}
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return errors.New("TLS needs both a certificate and a key file (--tls-cert and --tls-key)")
	}
	if s.Authenticated() || IsLoopback(s.Addr) {
		return nil
	}
	if !s.AllowUnauthenticated {
		return fmt.Errorf("%s %s listens beyond loopback but clients are not authenticated: anyone who can reach it could %s. "+
			"Give --credentials FILE (users from `intd passwd`) or --tls-client-ca FILE (mutual TLS), or listen on loopback (the default, %s); "+
			"--allow-unauthenticated accepts the risk", addrFlag, s.Addr, risk, defaultAddr)
	}
	log.Warn("UNAUTHENTICATED gNMI beyond loopback (--allow-unauthenticated): anyone who can reach "+s.Addr+" can "+risk, "addr", s.Addr)
	return nil
}

// PrepareStateDir creates the state directory, and checks that prog may
// write in it, when the self-signed certificate is to be kept there or
// the command keeps other files there (keep).
func (s *Settings) PrepareStateDir(prog string, keep bool) error {
	if !keep && (s.Insecure || s.TLSCert != "") {
		return nil
	}
	if err := os.MkdirAll(s.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory (--state-dir): %w; run %s as root or give a directory it may write", err, prog)
	}
	if err := CheckWritableDir(s.StateDir, "state directory (--state-dir)"); err != nil {
		return fmt.Errorf("%w; run %s as root or give a directory it may write", err, prog)
	}
	return nil
}

// CheckWritableDir checks that files can be created in dir (where a file
// is saved atomically by renaming a temporary one over it); what names
// the setting in the error.
func CheckWritableDir(dir, what string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %s is not a directory", what, dir)
	}
	f, err := os.CreateTemp(dir, ".intd-write-check*")
	if err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", what, dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// ServerOptions are the server options for these settings: credentials,
// and TLS unless --insecure.
func (s *Settings) ServerOptions(log *slog.Logger) ([]server.Option, error) {
	var opts []server.Option
	if s.Credentials != "" {
		creds, err := server.LoadCredentials(s.Credentials)
		if err != nil {
			return nil, err
		}
		opts = append(opts, server.WithCredentials(creds))
	}
	if !s.Insecure {
		cfg, err := s.TLS(log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, server.WithTLS(cfg))
	}
	return opts, nil
}

// TLS is the server's TLS: --tls-cert/--tls-key, or the self-signed
// certificate kept in the state directory (made at the first start). Its
// fingerprint is logged so that clients can pin it.
func (s *Settings) TLS(log *slog.Logger) (*tls.Config, error) {
	if s.TLSCert != "" {
		cfg, err := server.TLSConfig(s.TLSCert, s.TLSKey, s.TLSClientCA)
		if err != nil {
			return nil, err
		}
		log.Info("TLS certificate", "file", s.TLSCert, "sha256-fingerprint", server.Fingerprint(cfg.Certificates[0].Certificate[0]))
		return cfg, nil
	}
	hosts := server.CertHosts(s.Addr)
	cert, created, err := server.StateCert(s.StateDir, hosts)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(s.StateDir, server.StateCertFile)
	fp := server.Fingerprint(cert.Certificate[0])
	if created {
		log.Info("made a self-signed TLS certificate, kept for the next starts; clients trust this file (gnmic --tls-ca) or pin its fingerprint",
			"file", file, "sha256-fingerprint", fp, "names", slices.Concat(cert.Leaf.DNSNames, ipStrings(cert.Leaf.IPAddresses)))
	} else {
		log.Info("self-signed TLS certificate; clients trust this file (gnmic --tls-ca) or pin its fingerprint", "file", file, "sha256-fingerprint", fp)
	}
	if un := server.Uncovered(cert.Leaf, hosts); len(un) > 0 {
		log.Warn("the kept TLS certificate does not cover some of this node's names and addresses: clients using them fail to verify it; "+
			"delete it and its key to have a new one made (clients must trust the new one)", "file", file, "not-covered", un)
	}
	return server.TLSConfigFor(cert, s.TLSClientCA)
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}
