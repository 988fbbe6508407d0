package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// caWithClients makes a CA and client certificates it signs, one per
// common name.
func caWithClients(t *testing.T, names ...string) (caPEM []byte, clients []tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	for i, n := range names {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: n},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), clients
}

// A verified client certificate names a user of the credentials file
// marked "certificate", with that user's role; any other client still
// needs a password.
func TestCertificateIdentity(t *testing.T) {
	caPEM, certs := caWithClients(t, "alice", "dave")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, caPEM, 0o600)
	tlsCfg, err := TLSConfig("", "", caFile)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := HashPassword("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := ParseCredentials("alice read-only certificate\ncarol read-write " + hash + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCredentials("alice read-only certificate\nalice read-write certificate\n"); err == nil {
		t.Error("a user listed twice was accepted")
	}
	logs := &logBuffer{}
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithLogger(slog.New(slog.NewJSONHandler(logs, nil))), WithTLS(tlsCfg), WithCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeApplier{counter: 1}
	if err := srv.AddTarget(context.Background(), "dut", fake, TargetOptions{Initial: exampleConfig(t)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(9)}}}

	alice := serve(t, srv, fake, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: certs[:1]})))
	if _, err := alice.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}, Encoding: gpb.Encoding_JSON_IETF}); err != nil {
		t.Fatalf("alice by certificate, Get: %v", err)
	}
	if _, err := alice.client.Set(ctx, set); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice (read-only by certificate) Set: %v, want PermissionDenied", err)
	}
	if logs.find("request refused", map[string]string{"user": "alice", "reason": "read-only"}) == nil {
		t.Errorf("refusal not logged under the certificate's user:\n%s", logs)
	}
	// A password on the same connection wins: carol may Set.
	if _, err := alice.client.Set(metadata.AppendToOutgoingContext(ctx, "username", "carol", "password", "s3cret"), set); err != nil {
		t.Fatalf("carol by password, Set: %v", err)
	}
	if logs.find("Set applied", map[string]string{"user": "carol"}) == nil {
		t.Errorf("no audit line naming carol:\n%s", logs)
	}
	// dave's certificate is verified but names no certificate user.
	dave := serve(t, srv, fake, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: certs[1:]})))
	if _, err := dave.client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("dave (certificate of no user, no password) Get: %v, want Unauthenticated", err)
	}
}

// Certificate and key files replaced on disk are served from the next
// handshake on, and files that do not load leave the last good pair.
func TestTLSReload(t *testing.T) {
	dir, one, two := t.TempDir(), t.TempDir(), t.TempDir()
	c1, _, err := StateCert(one, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := StateCert(two, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	install := func(from string, stamp time.Time) {
		for src, dst := range map[string]string{filepath.Join(from, StateCertFile): certFile, filepath.Join(from, StateKeyFile): keyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(dst, stamp, stamp)
		}
	}
	install(one, time.Now().Add(-time.Hour))
	tlsCfg, err := TLSConfig(certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithTLS(tlsCfg))
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeApplier{counter: 1}
	if err := srv.AddTarget(context.Background(), "dut", fake, TargetOptions{}); err != nil {
		t.Fatal(err)
	}
	env := serve(t, srv, fake, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	served := func() [32]byte {
		t.Helper()
		conn, err := tls.Dial("tcp", env.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
	}
	if got := served(); got != sha256.Sum256(c1.Certificate[0]) {
		t.Fatal("not serving the certificate file")
	}
	time.Sleep(1100 * time.Millisecond)
	install(two, time.Now())
	deadline := time.Now().Add(5 * time.Second)
	for served() != sha256.Sum256(c2.Certificate[0]) {
		if time.Now().After(deadline) {
			t.Fatal("the replaced certificate is not served")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A half-written certificate keeps the last good one.
	time.Sleep(1100 * time.Millisecond)
	os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600)
	time.Sleep(1100 * time.Millisecond)
	if served() != sha256.Sum256(c2.Certificate[0]) {
		t.Fatal("a broken certificate file replaced the good one")
	}
	// gRPC clients connect through it too.
	if _, err := env.client.Capabilities(context.Background(), &gpb.CapabilityRequest{}); err != nil {
		t.Fatal(err)
	}
}
