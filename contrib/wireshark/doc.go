// Package wireshark holds the test of intd.lua, the Wireshark dissector
// for INT v2.1 and Telemetry Reports v2.0 and 0.5: it generates captures
// of every kind of packet the project produces, with the soft dataplane
// and the report exporter, and checks that tshark with the dissector and
// `intcollector decode` agree on every field.
package wireshark
