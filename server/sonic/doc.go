// Package sonic makes SONiC's CONFIG_DB the source of a gNMI target's
// configuration: the DTEL, DTEL_REPORT_SESSION, DTEL_INT_SESSION,
// DTEL_QUEUE_REPORT and DTEL_EVENT tables and the rules of ACL tables of
// type DTEL_FLOW_WATCHLIST, as sonic-swss's orchagent reads them. Like a
// gNMI client it knows YANG and Redis, not packets: a Source reads the
// tables, translates them entry by entry into intd's YANG (Resolve) and
// applies what changed (DiffRequest) with the server's OwnerSet, the same
// transaction as a gNMI Set; it writes the entries' statuses to STATE_DB and the
// target's counters (read with gNMI Get) to COUNTERS_DB.
//
// One entry intd cannot take never holds back the others: translation
// refuses it (keeping its previously applied version when there is one),
// and when the orchestrator refuses the applied whole, the YANG path its
// error names is tied back to the entry and field it came from, which is
// refused the same way before applying again.
//
// Changes are followed with Redis keyspace notifications, debounced (an
// entry is written field by field) into a full read; a lost connection
// keeps the running configuration and is retried with backoff, then
// everything is read and written again. ToConfigDB is the reverse
// translation, for migration and review. docs/sonic.md documents the
// mapping table by table, the STATE_DB and COUNTERS_DB keys, and what is
// not supported yet.
package sonic
