// Hand-written: the data paths of keyed list entries, as errors name them.

package gen

import (
	"fmt"
	"strconv"
)

// IntSessionPath is the data path of an INT session.
func IntSessionPath(name string) string {
	return "/int/int-sessions/int-session[name=" + name + "]"
}

// ReportSessionPath is the data path of a report session.
func ReportSessionPath(name string) string {
	return "/int/report-sessions/report-session[name=" + name + "]"
}

// EntryPath is the data path of a watchlist entry.
func EntryPath(seq uint32) string {
	return "/int/watchlist/entries/entry[sequence-id=" + strconv.FormatUint(uint64(seq), 10) + "]"
}

// QueueReportPath is the data path of a queue report.
func QueueReportPath(ifname string, q uint8) string {
	return fmt.Sprintf("/int/queue-reports/queue-report[interface=%s][queue-id=%d]", ifname, q)
}
