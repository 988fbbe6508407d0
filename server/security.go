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
	"fmt"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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

func (u *user) check(password string) bool {
	sum := sha256.Sum256(append(append([]byte{}, u.salt...), password...))
	u.fastM.Lock()
	fast := u.fast
	u.fastM.Unlock()
	if fast != nil && subtle.ConstantTimeCompare(fast, sum[:]) == 1 {
		return true
	}
	key, err := pbkdf2.Key(sha256.New, password, u.salt, u.iter, len(u.key))
	if err != nil || subtle.ConstantTimeCompare(key, u.key) != 1 {
		return false
	}
	u.fastM.Lock()
	u.fast = sum[:]
	u.fastM.Unlock()
	return true
}

// Credentials are the users allowed in, from a credentials file.
type Credentials struct {
	users map[string]*user
}

// ParseCredentials reads a credentials file: one user per line,
// "NAME ROLE HASH" separated by blanks, ROLE read-only or read-write and
// HASH from HashPassword (`intd passwd` prints such lines). Blank lines
// and lines starting with # are ignored.
func ParseCredentials(data string) (*Credentials, error) {
	c := &Credentials{users: map[string]*user{}}
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
		if c.users[f[0]] != nil {
			return nil, fmt.Errorf("line %d: user %s listed twice", ln, f[0])
		}
		c.users[f[0]] = &user{role: role, iter: iter, salt: salt, key: key}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(c.users) == 0 {
		return nil, fmt.Errorf("no users")
	}
	return c, nil
}

// LoadCredentials reads a credentials file (see ParseCredentials).
func LoadCredentials(path string) (*Credentials, error) {
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

// authenticate checks the username/password metadata of ctx.
func (c *Credentials) authenticate(ctx context.Context) (Role, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	name, pw := first(md.Get("username")), first(md.Get("password"))
	if name == "" {
		return 0, status.Error(codes.Unauthenticated, "username and password metadata required")
	}
	u := c.users[name]
	if u == nil || !u.check(pw) {
		return 0, status.Error(codes.Unauthenticated, "bad username or password")
	}
	return u.role, nil
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

func (c *Credentials) authorize(ctx context.Context, method string) error {
	role, err := c.authenticate(ctx)
	if err != nil {
		return err
	}
	if role < needed(method) {
		return status.Errorf(codes.PermissionDenied, "%s users may not call %s", role, method)
	}
	return nil
}

func (c *Credentials) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := c.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (c *Credentials) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := c.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// SelfSignedCert makes an ECDSA P-256 certificate valid for a year for
// the given host names and addresses (localhost and the loopback
// addresses are always included). It lives only in memory.
func SelfSignedCert(hosts ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"intd"}, CommonName: "intd self-signed"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
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

// TLSConfig builds a server TLS configuration: the certificate and key
// files, or a self-signed certificate when both are empty; with
// clientCAFile, clients must present a certificate signed by one of its
// CAs (mutual TLS).
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
