// Package gnmitest reads gNMI subscriptions in tests.
package gnmitest

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// UntilSync returns the notifications a subscription receives up to its
// sync_response, failing the test when the stream ends first.
func UntilSync(t testing.TB, sub gpb.GNMI_SubscribeClient) []*gpb.Notification {
	t.Helper()
	var ns []*gpb.Notification
	for {
		m, err := sub.Recv()
		if err != nil {
			t.Fatalf("stream ended before sync_response: %v", err)
		}
		if m.GetSyncResponse() {
			return ns
		}
		ns = append(ns, m.GetUpdate())
	}
}
