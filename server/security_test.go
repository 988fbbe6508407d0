package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	refpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
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
	srv, err := New(WithStatePollInterval(time.Hour), WithLogger(quietLogger()), WithTLS(tlsCfg),
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

func TestMutualTLS(t *testing.T) {
	client, err := SelfSignedCert()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.Certificate[0]}), 0o600)
	tlsCfg, err := TLSConfig("", "", caFile)
	if err != nil {
		t.Fatal(err)
	}
	good := startSecure(t, tlsCfg, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{client}})))
	if _, err := good.client.Capabilities(withUser("viewer", "viewer-secret"), &gpb.CapabilityRequest{}); err != nil {
		t.Fatalf("client with certificate: %v", err)
	}
	conn, err := grpc.NewClient(good.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(withUser("viewer", "viewer-secret"), 5*time.Second)
	defer cancel()
	if _, err := gpb.NewGNMIClient(conn).Capabilities(ctx, &gpb.CapabilityRequest{}); err == nil {
		t.Fatal("client without a certificate was let in")
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
