// Package server is intd's gNMI service: transport, authentication and
// the Capabilities, Get, Set and Subscribe RPCs over the YANG models in
// gen/. It knows YANG, not packets: configuration goes down through an
// Applier (dtel's orchestrator), state comes back up from it.
package server
