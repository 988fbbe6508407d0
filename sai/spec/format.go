package spec

import "strconv"

// ReportFormat is a telemetry report encapsulation.
type ReportFormat uint8

// Report formats; their metadata is in ReportFormatTable.
const (
	ReportFormatV2  ReportFormat = iota // Telemetry Report v2.0 (the default)
	ReportFormatV05                     // the legacy v0.5 format
)

// ReportFormatInfo describes one report format.
type ReportFormatInfo struct {
	Format ReportFormat
	Name   string // the specification's version, e.g. "2.0"
	// Coalescing: several reports may share one packet (v2.0's group
	// header); v0.5 sends one report per packet.
	Coalescing bool
}

// ReportFormatTable lists the report formats in numeric order.
var ReportFormatTable = [...]ReportFormatInfo{
	{ReportFormatV2, "2.0", true},
	{ReportFormatV05, "0.5", false},
}

// Valid reports whether f is a defined format.
func (f ReportFormat) Valid() bool { return int(f) < len(ReportFormatTable) }

// Coalescing reports whether the format carries several reports per packet.
func (f ReportFormat) Coalescing() bool { return f.Valid() && ReportFormatTable[f].Coalescing }

// String returns the format's version, e.g. "2.0".
func (f ReportFormat) String() string {
	if f.Valid() {
		return ReportFormatTable[f].Name
	}
	return "ReportFormat(" + strconv.Itoa(int(f)) + ")"
}
