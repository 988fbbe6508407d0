package sai

import "github.com/intd-project/intd/sai/spec"

// DropReason is the drop reason code carried in drop reports and counted in
// Stats.Drops: SD-Fabric's codes, listed in spec.DropReasonTable.
type DropReason = spec.DropReason
