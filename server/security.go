package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Role is what an authenticated user may do.
type Role int

const (
	// ReadOnly users may call Capabilities, Get and Subscribe.
	ReadOnly Role = iota + 1
	// ReadWrite users may also call Set.
	ReadWrite
)

func (r Role) String() string {
	switch r {
	case ReadOnly:
		return "read-only"
	case ReadWrite:
		return "read-write"
	}
	return "none"
}

func parseRole(s string) (Role, error) {
	switch s {
	case "read-only", "ro":
		return ReadOnly, nil
	case "read-write", "rw":
		return ReadWrite, nil
	}
	return 0, fmt.Errorf("unknown role %q (want read-only or read-write)", s)
}

const (
	hashScheme     = "pbkdf2-sha256"
	hashIterations = 210000
)

// HashPassword returns a salted PBKDF2-SHA256 hash of password in the
// form used by credentials files: pbkdf2-sha256$ITERATIONS$SALT$KEY (salt
// and key in unpadded base64).
func HashPassword(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	key, err := pbkdf2.Key(sha256.New, password, salt, hashIterations, 32)
	if err != nil {
		return "", fmt.Errorf("hashing: %w", err)
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("%s$%d$%s$%s", hashScheme, hashIterations, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

type user struct {
	role  Role
	iter  int
	salt  []byte
	key   []byte
	fast  []byte // SHA-256 of a password already verified, to skip PBKDF2
	fastM sync.Mutex
}

// verified reports whether password is the one already verified.
func (u *user) verified(password string) bool {
	sum := sha256.Sum256(append(append([]byte{}, u.salt...), password...))
	u.fastM.Lock()
	fast := u.fast
	u.fastM.Unlock()
	return fast != nil && subtle.ConstantTimeCompare(fast, sum[:]) == 1
}

func (u *user) check(password string) bool {
	sum := sha256.Sum256(append(append([]byte{}, u.salt...), password...))
	if u.verified(password) {
		return true
	}
	pbkdf2Runs.Add(1)
	key, err := pbkdf2.Key(sha256.New, password, u.salt, u.iter, len(u.key))
	if err != nil || subtle.ConstantTimeCompare(key, u.key) != 1 {
		return false
	}
	u.fastM.Lock()
	u.fast = sum[:]
	u.fastM.Unlock()
	return true
}

// pbkdf2Runs counts password hashings, for tests.
var pbkdf2Runs atomic.Int64

// Credentials are the users allowed in, from a credentials file. A name
// that is not a user costs the same hashing as a wrong password (no
// timing tells names apart), and each client (peer address) may fail
// loginBurst times, then once per loginEvery: past that its logins are
// refused before any hashing, except for a password already verified.
type Credentials struct {
	users map[string]*user
	// certUsers are the users known by their client certificate.
	certUsers map[string]Role
	nobody    *user // hashed against for unknown names
	limitMu   sync.Mutex
	limits    map[string]*rate.Limiter
	every     time.Duration
	burst     int
}

const (
	loginEvery = 2 * time.Second
	loginBurst = 5
	// reasonTooMany is the reason for refusing a client over its
	// allowance of failed logins.
	reasonTooMany = "too many failed logins"
)

// ParseCredentials reads a credentials file: one user per line,
// "NAME ROLE HASH" separated by blanks, ROLE read-only or read-write and
// HASH from HashPassword (`intd passwd` prints such lines), or the word
// "certificate" instead of a hash: a client presenting a verified
// certificate (mutual TLS) whose subject common name or a DNS, email or
// URI subject alternative name is NAME is that user, without a password.
// Blank lines and lines starting with # are ignored.
func ParseCredentials(data string) (*Credentials, error) {
	c := &Credentials{users: map[string]*user{}, certUsers: map[string]Role{}}
	sc := bufio.NewScanner(strings.NewReader(data))
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want NAME ROLE HASH", ln)
		}
		role, err := parseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		if f[2] == "certificate" {
			if c.users[f[0]] != nil || c.certUsers[f[0]] != 0 {
				return nil, fmt.Errorf("line %d: user %s listed twice", ln, f[0])
			}
			c.certUsers[f[0]] = role
			continue
		}
		parts := strings.Split(f[2], "$")
		if len(parts) != 4 || parts[0] != hashScheme {
			return nil, fmt.Errorf("line %d: hash is not %s$ITERATIONS$SALT$KEY", ln, hashScheme)
		}
		iter, err := strconv.Atoi(parts[1])
		if err != nil || iter < 1 {
			return nil, fmt.Errorf("line %d: bad iteration count %q", ln, parts[1])
		}
		salt, err1 := base64.RawStdEncoding.DecodeString(parts[2])
		key, err2 := base64.RawStdEncoding.DecodeString(parts[3])
		if err1 != nil || err2 != nil || len(key) == 0 {
			return nil, fmt.Errorf("line %d: bad base64 in hash", ln)
		}
		if c.users[f[0]] != nil || c.certUsers[f[0]] != 0 {
			return nil, fmt.Errorf("line %d: user %s listed twice", ln, f[0])
		}
		c.users[f[0]] = &user{role: role, iter: iter, salt: salt, key: key}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(c.users) == 0 && len(c.certUsers) == 0 {
		return nil, fmt.Errorf("no users")
	}
	c.nobody = &user{iter: hashIterations, salt: make([]byte, 16), key: make([]byte, 32)}
	for _, u := range c.users {
		c.nobody.iter = max(c.nobody.iter, u.iter)
	}
	if _, err := rand.Read(c.nobody.key); err != nil {
		return nil, err
	}
	c.limits, c.every, c.burst = map[string]*rate.Limiter{}, loginEvery, loginBurst
	return c, nil
}

// certUser finds the user a verified client certificate names.
func (c *Credentials) certUser(ctx context.Context) (string, Role, bool) {
	if len(c.certUsers) == 0 {
		return "", 0, false
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", 0, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return "", 0, false
	}
	leaf := ti.State.VerifiedChains[0][0]
	names := slices.Concat([]string{leaf.Subject.CommonName}, leaf.DNSNames, leaf.EmailAddresses)
	for _, u := range leaf.URIs {
		names = append(names, u.String())
	}
	for _, n := range names {
		if role, ok := c.certUsers[n]; ok && n != "" {
			return n, role, true
		}
	}
	return "", 0, false
}

// limiter returns the failed-login limiter of a client.
func (c *Credentials) limiter(client string) *rate.Limiter {
	c.limitMu.Lock()
	defer c.limitMu.Unlock()
	l := c.limits[client]
	if l == nil {
		if len(c.limits) >= 10000 { // forget clients back to a full allowance
			for k, v := range c.limits {
				if v.Tokens() >= float64(c.burst) {
					delete(c.limits, k)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(c.every), c.burst)
		c.limits[client] = l
	}
	return l
}

// LoadCredentials reads a credentials file (see ParseCredentials). A file
// that group or others may read or write is refused: its hashes can be
// attacked offline.
func LoadCredentials(path string) (*Credentials, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("credentials %s: mode %04o lets group or others read it; run chmod 600 %s", path, m, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	c, err := ParseCredentials(string(data))
	if err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	return c, nil
}

// authenticate checks the username/password metadata of ctx. The user
// name is returned even when the check fails, for the log; reason says
// why it failed without telling the client.
func (c *Credentials) authenticate(ctx context.Context) (name string, role Role, reason string) {
	md, _ := metadata.FromIncomingContext(ctx)
	name, pw := first(md.Get("username")), first(md.Get("password"))
	if name == "" {
		if n, role, ok := c.certUser(ctx); ok {
			return n, role, ""
		}
		return "", 0, "no username metadata"
	}
	u := c.users[name]
	if u != nil && u.verified(pw) {
		return name, u.role, ""
	}
	lim := c.limiter(clientOf(ctx))
	if lim.Tokens() < 1 {
		return name, 0, reasonTooMany
	}
	if u == nil {
		c.nobody.check(pw) // as long as a wrong password takes
		lim.Allow()
		return name, 0, "unknown user"
	}
	if !u.check(pw) {
		lim.Allow()
		return name, 0, "bad password"
	}
	return name, u.role, ""
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// needed is the role an RPC needs.
func needed(method string) Role {
	if method == "/gnmi.gNMI/Set" {
		return ReadWrite
	}
	return ReadOnly
}

// userKey carries the authenticated user name in a request context.
type userKey struct{}

// identity names who sent a request, for logs: the user of the
// credentials, else the subject of a verified client certificate, else
// "anonymous"; and the peer address ("" in process).
func identity(ctx context.Context) (user, addr string) {
	user = "anonymous"
	p, ok := peer.FromContext(ctx)
	if ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	if ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
			user = "cert:" + ti.State.VerifiedChains[0][0].Subject.String()
		}
	}
	if u, ok := ctx.Value(userKey{}).(string); ok {
		user = u
	}
	return user, addr
}

// authorize checks the credentials of a request to method, logs a
// refusal, and returns the context carrying the user name.
func (s *Server) authorize(ctx context.Context, method string) (context.Context, error) {
	c := s.o.creds
	name, role, reason := c.authenticate(ctx)
	_, addr := identity(ctx)
	if reason != "" {
		s.log.Warn("authentication failed", "peer", addr, "user", name, "method", method, "reason", reason)
		if name == "" {
			return nil, status.Error(codes.Unauthenticated, "username and password metadata required")
		}
		if reason == reasonTooMany {
			return nil, status.Errorf(codes.Unauthenticated, "%s from %s: try again later", reason, clientOf(ctx))
		}
		return nil, status.Error(codes.Unauthenticated, "bad username or password")
	}
	if role < needed(method) {
		s.log.Warn("request refused", "peer", addr, "user", name, "method", method, "reason", role.String()+" user")
		return nil, status.Errorf(codes.PermissionDenied, "%s users may not call %s", role, method)
	}
	return context.WithValue(ctx, userKey{}, name), nil
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// authStream is a server stream whose context carries the user.
type authStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authStream) Context() context.Context { return a.ctx }

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, authStream{ss, ctx})
}

// loggedTLS is TLS transport credentials that log refused handshakes
// (a client without an acceptable certificate under mutual TLS, a
// plaintext client) with the peer address: gRPC itself drops them
// silently.
type loggedTLS struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (l loggedTLS) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := l.TransportCredentials.ServerHandshake(c)
	if err != nil {
		// A bare connect-and-close (a port check) is not worth a warning.
		lvl := slog.LevelWarn
		if errors.Is(err, io.EOF) {
			lvl = slog.LevelDebug
		}
		l.log.Log(context.Background(), lvl, "TLS handshake refused", "peer", c.RemoteAddr().String(), "reason", err.Error())
	}
	return conn, info, err
}

func (l loggedTLS) Clone() credentials.TransportCredentials {
	return loggedTLS{l.TransportCredentials.Clone(), l.log}
}

// certValidity is how long a generated certificate is valid. Clients pin
// it (by file or fingerprint), so it should outlive the node's
// deployment; an expired one is replaced at start.
const certValidity = 10 * 365 * 24 * time.Hour

// SelfSignedCert makes a self-signed ECDSA P-256 server certificate for
// the given host names and addresses (localhost and the loopback
// addresses are always included). It is an end-entity certificate (not a
// CA: it cannot sign others), for server authentication only.
func SelfSignedCert(hosts ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serial: %w", err)
	}
	cn := "intd"
	if len(hosts) > 0 && hosts[0] != "" && net.ParseIP(hosts[0]) == nil {
		cn = hosts[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"intd self-signed"}, CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	for _, h := range append([]string{"localhost", "127.0.0.1", "::1"}, hosts...) {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("creating certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Names of the generated certificate and key in the state directory.
const (
	StateCertFile = "gnmi-cert.pem"
	StateKeyFile  = "gnmi-key.pem"
)

// StateCert returns the self-signed certificate kept in dir (files
// StateCertFile and StateKeyFile, the key mode 0600), creating it for
// hosts when there is none or it has expired. created tells whether it
// is new (clients that pinned the old one must pin it again).
func StateCert(dir string, hosts []string) (cert tls.Certificate, created bool, err error) {
	certPath, keyPath := filepath.Join(dir, StateCertFile), filepath.Join(dir, StateKeyFile)
	cert, err = loadStateCert(certPath, keyPath)
	switch {
	case err == nil && time.Now().Before(cert.Leaf.NotAfter):
		return cert, false, nil
	case err == nil, errors.Is(err, os.ErrNotExist):
		// Expired, or never made.
	default:
		return tls.Certificate{}, false, err
	}
	cert, err = SelfSignedCert(hosts...)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return tls.Certificate{}, false, fmt.Errorf("encoding key: %w", err)
	}
	// The key first: a certificate without its key is never left behind.
	if err := writeFileAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := writeFileAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644); err != nil {
		return tls.Certificate{}, false, err
	}
	return cert, true, nil
}

func loadStateCert(certPath, keyPath string) (tls.Certificate, error) {
	fi, err := os.Stat(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS key: %w", err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return tls.Certificate{}, fmt.Errorf("TLS key %s: mode %04o lets group or others read it; run chmod 600 %s", keyPath, m, keyPath)
	}
	if _, err := os.Stat(certPath); err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS certificate %s: %w (delete it and %s to have a new one made)", certPath, err, keyPath)
	}
	return cert, nil
}

// writeFileAtomic writes data to a new file next to path and renames it
// into place, so a crash never leaves a half-written file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// CertHosts are the names and addresses a certificate of a server
// listening on addr should cover: the host name, every address of the
// node's interfaces (link-local ones aside, they need a zone), and the
// listen host when one is named.
func CertHosts(addr string) []string {
	var hosts []string
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, host)
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				hosts = append(hosts, n.IP.String())
			}
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// Fingerprint is the SHA-256 of a certificate's DER encoding, as
// colon-separated hex pairs (openssl x509 -noout -fingerprint -sha256).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	var b strings.Builder
	for i, c := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", c)
	}
	return b.String()
}

// Uncovered returns the hosts (names or addresses) that cert is not valid
// for.
func Uncovered(leaf *x509.Certificate, hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if h != "" && leaf.VerifyHostname(h) != nil {
			out = append(out, h)
		}
	}
	return out
}

// TLSConfig builds a server TLS configuration: the certificate and key
// files, or a self-signed certificate made in memory when both are empty;
// with clientCAFile, clients must present a certificate signed by one of
// its CAs (mutual TLS).
func TLSConfig(certFile, keyFile, clientCAFile string, hosts ...string) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case certFile == "" && keyFile == "":
		cert, err = SelfSignedCert(hosts...)
	case certFile == "" || keyFile == "":
		return nil, fmt.Errorf("TLS needs both a certificate and a key file")
	default:
		cert, err = tls.LoadX509KeyPair(certFile, keyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	cfg, err := TLSConfigFor(cert, clientCAFile)
	if err != nil || certFile == "" {
		return cfg, err
	}
	rl := &certReloader{certFile: certFile, keyFile: keyFile, cfg: cfg}
	rl.stamp, _ = fileStamps(certFile, keyFile)
	cfg = cfg.Clone()
	cfg.GetConfigForClient = rl.config
	return cfg, nil
}

// certReloader serves the certificate and key files as they are now:
// renewed files (cert-manager, ACME clients, an operator's cp) take
// effect at the next handshake, without a restart. Files that do not
// load (say, half written) leave the last good pair in use.
type certReloader struct {
	certFile, keyFile string
	mu                sync.Mutex
	cfg               *tls.Config // without GetConfigForClient
	stamp             string      // of the files cfg was loaded from
	checked           time.Time
}

// fileStamps identifies the current content of files by size and
// modification time.
func fileStamps(files ...string) (string, error) {
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

func (r *certReloader) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Stat at most once a second, however many clients connect.
	if now := time.Now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		if st, err := fileStamps(r.certFile, r.keyFile); err == nil && st != r.stamp {
			cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
			if err != nil {
				slog.Warn("TLS certificate files changed but do not load; still serving the previous certificate",
					"cert", r.certFile, "key", r.keyFile, "err", err)
			} else {
				cfg := r.cfg.Clone()
				cfg.Certificates = []tls.Certificate{cert}
				r.cfg, r.stamp = cfg, st
				slog.Info("TLS certificate reloaded", "file", r.certFile, "sha256-fingerprint", Fingerprint(cert.Certificate[0]))
			}
		}
	}
	return r.cfg, nil
}

// TLSConfigFor builds a server TLS configuration serving cert; with
// clientCAFile, clients must present a certificate signed by one of its
// CAs (mutual TLS).
func TLSConfigFor(cert tls.Certificate, clientCAFile string) (*tls.Config, error) {
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA %s: no PEM certificates", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
