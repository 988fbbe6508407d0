package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	refpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/intd-project/intd/internal/logtest"
)

func credentialsFor(t testing.TB, users map[string]string) *Credentials {
	t.Helper()
	var lines string
	for name, role := range users {
		h, err := HashPassword(name + "-secret")
		if err != nil {
			t.Fatal(err)
		}
		lines += fmt.Sprintf("%s %s %s\n", name, role, h)
	}
	c, err := ParseCredentials("# users\n\n" + lines)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func withUser(name, password string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "username", name, "password", password)
}

func startSecure(t *testing.T, tlsCfg *tls.Config, dopts ...grpc.DialOption) *testEnv {
	t.Helper()
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithLogger(quietLogger()), WithTLS(tlsCfg),
		WithCredentials(credentialsFor(t, map[string]string{"admin": "read-write", "viewer": "read-only"})))
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeApplier{counter: 1}
	if err := srv.AddTarget(context.Background(), "dut", fake, TargetOptions{Initial: exampleConfig(t)}); err != nil {
		t.Fatal(err)
	}
	return serve(t, srv, fake, dopts...)
}

func TestAuthAndTLS(t *testing.T) {
	tlsCfg, err := TLSConfig("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(tlsCfg.Certificates[0].Leaf)
	env := startSecure(t, tlsCfg, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})))
	getReq := &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int/node/config/node-id")}}
	setReq := &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(2)}}}

	_, err = env.client.Get(context.Background(), getReq)
	wantCode(t, err, codes.Unauthenticated)
	_, err = env.client.Get(withUser("viewer", "wrong"), getReq)
	wantCode(t, err, codes.Unauthenticated)
	_, err = env.client.Get(withUser("nobody", "nobody-secret"), getReq)
	wantCode(t, err, codes.Unauthenticated)

	viewer := withUser("viewer", "viewer-secret")
	if _, err := env.client.Get(viewer, getReq); err != nil {
		t.Fatalf("read-only Get: %v", err)
	}
	if _, err := env.client.Capabilities(viewer, &gpb.CapabilityRequest{}); err != nil {
		t.Fatalf("read-only Capabilities: %v", err)
	}
	st, err := env.client.Subscribe(viewer)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: subList(gpb.SubscriptionList_ONCE, onChange(t, "/int/node/config/node-id"))}})
	if _, err := st.Recv(); err != nil {
		t.Fatalf("read-only Subscribe: %v", err)
	}
	_, err = env.client.Set(viewer, setReq)
	wantCode(t, err, codes.PermissionDenied)
	if env.fake.applyCount() != 1 {
		t.Error("a denied Set reached the applier")
	}
	// Twice: the second check takes the verified-password fast path.
	for i := 0; i < 2; i++ {
		if _, err := env.client.Set(withUser("admin", "admin-secret"), setReq); err != nil {
			t.Fatalf("read-write Set: %v", err)
		}
	}
	_, err = env.client.Set(withUser("admin", "viewer-secret"), setReq)
	wantCode(t, err, codes.Unauthenticated)

	// A plaintext client cannot talk to the TLS server.
	conn, err := grpc.NewClient(env.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(viewer, 2*time.Second)
	defer cancel()
	_, err = gpb.NewGNMIClient(conn).Get(ctx, getReq)
	if err == nil {
		t.Fatal("plaintext client got an answer from the TLS server")
	}

	// Server reflection lists gNMI.
	rc, err := refpb.NewServerReflectionClient(env.conn).ServerReflectionInfo(viewer)
	if err != nil {
		t.Fatal(err)
	}
	rc.Send(&refpb.ServerReflectionRequest{MessageRequest: &refpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range resp.GetListServicesResponse().GetService() {
		found = found || s.GetName() == "gnmi.gNMI"
	}
	if !found {
		t.Errorf("reflection services: %v", resp)
	}
}

// testCA makes a CA and a client certificate it signed (for CN name).
func testCA(t *testing.T, name string) (caPEM []byte, client tls.Certificate) {
	t.Helper()
	caPEM, clients := caWithClients(t, name)
	return caPEM, clients[0]
}

// logBuffer collects JSON log lines.
type logBuffer struct{ logtest.Buffer }

// find returns the first logged record with message msg whose attributes
// include every key/value of want.
func (l *logBuffer) find(msg string, want map[string]string) map[string]any {
	for _, line := range strings.Split(l.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) != nil || r["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if !strings.Contains(fmt.Sprint(r[k]), v) {
				ok = false
			}
		}
		if ok {
			return r
		}
	}
	return nil
}

func TestMutualTLS(t *testing.T) {
	caPEM, client := testCA(t, "alice")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, caPEM, 0o600)
	tlsCfg, err := TLSConfig("", "", caFile)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithLogger(slog.New(slog.NewJSONHandler(logs, nil))), WithTLS(tlsCfg))
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeApplier{counter: 1}
	if err := srv.AddTarget(context.Background(), "dut", fake, TargetOptions{Initial: exampleConfig(t)}); err != nil {
		t.Fatal(err)
	}
	good := serve(t, srv, fake, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{client}})))
	if _, err := good.client.Capabilities(context.Background(), &gpb.CapabilityRequest{}); err != nil {
		t.Fatalf("client with certificate: %v", err)
	}
	// The certificate's subject is the user in the audit log.
	if _, err := good.client.Set(context.Background(), &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/node-id"), Val: uintVal(9)}}}); err != nil {
		t.Fatal(err)
	}
	if logs.find("Set applied", map[string]string{"user": "CN=alice", "changes": "update /int/node/config/node-id = 9"}) == nil {
		t.Errorf("no audit line naming the certificate's subject:\n%s", logs)
	}
	conn, err := grpc.NewClient(good.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := gpb.NewGNMIClient(conn).Capabilities(ctx, &gpb.CapabilityRequest{}); err == nil {
		t.Fatal("client without a certificate was let in")
	}
	// A client certificate from another CA is refused too.
	_, stranger := testCA(t, "mallory")
	conn2, err := grpc.NewClient(good.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{stranger}})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := gpb.NewGNMIClient(conn2).Capabilities(ctx, &gpb.CapabilityRequest{}); err == nil {
		t.Fatal("client with a certificate of an unknown CA was let in")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		noCert := logs.find("TLS handshake refused", map[string]string{"peer": "127.0.0.1:", "reason": "certificate"})
		unknownCA := logs.find("TLS handshake refused", map[string]string{"peer": "127.0.0.1:", "reason": "unknown authority"})
		if noCert != nil && unknownCA != nil {
			if noCert["level"] != "WARN" {
				t.Errorf("handshake refusal logged at %v", noCert["level"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused handshakes not logged with peer and reason:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuditLog checks that Sets are logged with user, peer and changes,
// and refused Sets and failed logins with their reason.
func TestAuditLog(t *testing.T) {
	tlsCfg, err := TLSConfig("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	srv, err := newIntd(WithStatePollInterval(time.Hour), WithLogger(slog.New(slog.NewJSONHandler(logs, nil))), WithTLS(tlsCfg),
		WithCredentials(credentialsFor(t, map[string]string{"admin": "read-write", "viewer": "read-only"})))
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeApplier{counter: 1}
	if err := srv.AddTarget(context.Background(), "dut", fake, TargetOptions{Initial: exampleConfig(t)}); err != nil {
		t.Fatal(err)
	}
	env := serve(t, srv, fake, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	admin := withUser("admin", "admin-secret")
	set := &gpb.SetRequest{
		Prefix: &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}}},
		Delete: []*gpb.Path{gp(t, "/watchlist/entries/entry[sequence-id=20]")},
		Update: []*gpb.Update{{Path: gp(t, "/node/config/node-id"), Val: uintVal(42)}},
		Replace: []*gpb.Update{{Path: gp(t, "/flow-report-filter/config"),
			Val: jsonIETF(`{"report-interval": 500}`)}},
	}
	if _, err := env.client.Set(admin, set); err != nil {
		t.Fatal(err)
	}
	r := logs.find("Set applied", map[string]string{"user": "admin", "peer": "127.0.0.1:", "target": "dut"})
	if r == nil {
		t.Fatalf("no audit line for the Set:\n%s", logs)
	}
	changes := fmt.Sprint(r["changes"])
	for _, w := range []string{"delete /int/watchlist/entries/entry[sequence-id=20]", "replace /int/flow-report-filter/config = JSON (24 bytes)", "update /int/node/config/node-id = 42"} {
		if !strings.Contains(changes, w) {
			t.Errorf("audit changes %s lack %q", changes, w)
		}
	}
	if r["level"] != "INFO" {
		t.Errorf("audit line at %v", r["level"])
	}

	// A Set the schema refuses.
	_, err = env.client.Set(admin, &gpb.SetRequest{Update: []*gpb.Update{{Path: gp(t, "/int/node/config/no-such-leaf"), Val: uintVal(1)}}})
	wantCode(t, err, codes.NotFound)
	if r := logs.find("Set refused", map[string]string{"user": "admin", "peer": "127.0.0.1:", "code": "NotFound", "reason": "no-such-leaf", "changes": "no-such-leaf"}); r == nil || r["level"] != "WARN" {
		t.Errorf("refused Set not logged at WARN with its reason:\n%s", logs)
	}
	// A read-only user's Set.
	_, err = env.client.Set(withUser("viewer", "viewer-secret"), set)
	wantCode(t, err, codes.PermissionDenied)
	if logs.find("request refused", map[string]string{"user": "viewer", "peer": "127.0.0.1:", "method": "/gnmi.gNMI/Set", "reason": "read-only"}) == nil {
		t.Errorf("read-only Set not logged:\n%s", logs)
	}
	// Failed logins, with the reason the client is not told.
	_, err = env.client.Get(withUser("admin", "wrong"), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int")}})
	wantCode(t, err, codes.Unauthenticated)
	_, err = env.client.Get(withUser("eve", "x"), &gpb.GetRequest{Path: []*gpb.Path{gp(t, "/int")}})
	wantCode(t, err, codes.Unauthenticated)
	_, err = env.client.Capabilities(context.Background(), &gpb.CapabilityRequest{})
	wantCode(t, err, codes.Unauthenticated)
	for _, w := range []map[string]string{
		{"user": "admin", "reason": "bad password", "peer": "127.0.0.1:"},
		{"user": "eve", "reason": "unknown user", "peer": "127.0.0.1:"},
		{"reason": "no username", "peer": "127.0.0.1:", "method": "Capabilities"},
	} {
		if r := logs.find("authentication failed", w); r == nil || r["level"] != "WARN" {
			t.Errorf("failed authentication %v not logged at WARN:\n%s", w, logs)
		}
	}
	if strings.Contains(logs.String(), "admin-secret") || strings.Contains(logs.String(), "wrong") {
		t.Error("a password reached the log")
	}
}

func TestLoadCredentialsMode(t *testing.T) {
	h, err := HashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(f, []byte("alice read-write "+h+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(f); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		os.Chmod(f, mode)
		_, err := LoadCredentials(f)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), fmt.Sprintf("%04o", mode)) {
			t.Errorf("mode %04o: error %v, want a refusal saying chmod 600", mode, err)
		}
	}
}

// TestStateCert checks the generated certificate: kept with its key
// (0600), reused, an end-entity server certificate for the given names
// that a client can verify by trusting the file, replaced when expired.
func TestStateCert(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	hosts := []string{host, "192.0.2.7", "2001:db8::7"}
	c1, created, err := StateCert(dir, hosts)
	if err != nil || !created {
		t.Fatalf("first StateCert: created %v, %v", created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, StateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	c2, created, err := StateCert(dir, hosts)
	if err != nil || created {
		t.Fatalf("second StateCert: created %v, %v", created, err)
	}
	if Fingerprint(c1.Certificate[0]) != Fingerprint(c2.Certificate[0]) {
		t.Error("the certificate was not reused")
	}
	leaf := c2.Leaf
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Error("the generated certificate can sign certificates")
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("key usage %v, extended %v; want digitalSignature, serverAuth", leaf.KeyUsage, leaf.ExtKeyUsage)
	}
	if un := Uncovered(leaf, append(hosts, "localhost", "127.0.0.1", "::1")); len(un) > 0 {
		t.Errorf("certificate does not cover %v (DNS %v, IP %v)", un, leaf.DNSNames, leaf.IPAddresses)
	}
	if un := Uncovered(leaf, []string{"192.0.2.8", "other.example"}); len(un) != 2 {
		t.Errorf("Uncovered %v", un)
	}
	if fp := Fingerprint(c1.Certificate[0]); len(fp) != 95 || strings.Count(fp, ":") != 31 {
		t.Errorf("fingerprint %q", fp)
	}

	// A client that trusts the certificate file verifies the server by
	// its host name, no skipping of verification.
	tlsCfg, err := TLSConfigFor(c2, "")
	if err != nil {
		t.Fatal(err)
	}
	pemData, err := os.ReadFile(filepath.Join(dir, StateCertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("certificate file is not PEM")
	}
	env := startSecure(t, tlsCfg, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: host})))
	if _, err := env.client.Capabilities(withUser("viewer", "viewer-secret"), &gpb.CapabilityRequest{}); err != nil {
		t.Fatalf("client trusting the certificate file: %v", err)
	}

	// A key readable by others is refused.
	os.Chmod(filepath.Join(dir, StateKeyFile), 0o644)
	if _, _, err := StateCert(dir, hosts); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("key mode 0644: %v", err)
	}
	os.Chmod(filepath.Join(dir, StateKeyFile), 0o600)

	// An expired certificate is replaced.
	expired := *c2.Leaf
	key := c2.PrivateKey.(*ecdsa.PrivateKey)
	expired.NotBefore, expired.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &expired, &expired, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, StateCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	c3, created, err := StateCert(dir, hosts)
	if err != nil || !created || Fingerprint(c3.Certificate[0]) == Fingerprint(c1.Certificate[0]) {
		t.Errorf("expired certificate: created %v, %v", created, err)
	}
}

func TestCredentialsFileErrors(t *testing.T) {
	for _, bad := range []string{
		"",
		"alice read-write",
		"alice admin pbkdf2-sha256$1$c2FsdA$a2V5",
		"alice read-write md5$1$c2FsdA$a2V5",
		"alice read-write pbkdf2-sha256$x$c2FsdA$a2V5",
		"alice read-write pbkdf2-sha256$1$c2FsdA$a2V5\nalice read-only pbkdf2-sha256$1$c2FsdA$a2V5",
	} {
		if _, err := ParseCredentials(bad); err == nil {
			t.Errorf("credentials %q accepted", bad)
		}
	}
}

// Failed logins are rate-limited per client, refused before any hashing
// once the client is over its allowance (a password already verified
// still gets in); a name that is not a user costs the same hashing as a
// wrong password.
func TestLoginLimits(t *testing.T) {
	creds := credentialsFor(t, map[string]string{"admin": "read-write", "viewer": "read-only"})
	creds.every = time.Hour // no refill while the test runs
	env := startServer(t, TargetOptions{}, WithCredentials(creds))
	call := func(ctx context.Context) error {
		_, err := env.client.Capabilities(ctx, &gpb.CapabilityRequest{})
		return err
	}
	hashings := func(f func()) int64 {
		n := pbkdf2Runs.Load()
		f()
		return pbkdf2Runs.Load() - n
	}
	wantCode(t, call(withUser("admin", "admin-secret")), codes.OK)
	if n := hashings(func() { wantCode(t, call(withUser("nobody", "x")), codes.Unauthenticated) }); n != 1 {
		t.Errorf("an unknown user cost %d hashings, a wrong password 1", n)
	}
	if n := hashings(func() { wantCode(t, call(withUser("viewer", "wrong")), codes.Unauthenticated) }); n != 1 {
		t.Errorf("a wrong password cost %d hashings", n)
	}
	for i := 2; i < loginBurst; i++ {
		wantCode(t, call(withUser("viewer", "wrong")), codes.Unauthenticated)
	}
	// Over the allowance: no hashing at all, even for a right password
	// not yet verified.
	for _, u := range [][2]string{{"viewer", "wrong"}, {"nobody", "x"}, {"viewer", "viewer-secret"}} {
		var err error
		if n := hashings(func() { err = call(withUser(u[0], u[1])) }); n != 0 || !strings.Contains(fmt.Sprint(err), "too many failed logins") {
			t.Errorf("%s over the allowance: %v after %d hashings", u[0], err, n)
		}
	}
	wantCode(t, call(withUser("admin", "admin-secret")), codes.OK) // verified before
	// Once the allowance refills (here: as if loginEvery had passed),
	// logins are checked again.
	creds.limitMu.Lock()
	creds.limits = map[string]*rate.Limiter{}
	creds.limitMu.Unlock()
	wantCode(t, call(withUser("viewer", "viewer-secret")), codes.OK)
}
