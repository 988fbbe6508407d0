// Package spec is the vocabulary of the INT v2.1, Telemetry Report v2.0 and
// SAI DTel specifications shared by every layer: instruction bits, event
// types, drop reasons, encapsulations, INT header types, NPTs, report
// formats and the reports' type code points. Each enumeration is one table; names, word counts,
// masks and the YANG and SAI names are read from it, and the BPF C program
// gets the same constants from a header generated from it. The package
// imports nothing from the module, so any layer may use it.
package spec
