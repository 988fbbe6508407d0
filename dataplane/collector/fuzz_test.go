package collector

import "testing"

// FuzzDecode feeds arbitrary payloads to the decoder, the aggregation and
// the JSON form; none may panic.
func FuzzDecode(f *testing.F) {
	f.Add(testPayload(f, 1))
	f.Add(benchPayload(f, 2, 3))
	f.Add([]byte{0x02, 0x20, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0})
	c := New(Config{MaxFlows: 64})
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, b []byte) {
		c.HandlePacket(b, 1)
		d.PayloadToJSON(b)
		NewFrameDecoder(32766).DecodeFrame(1, b)
	})
}
