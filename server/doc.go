// Package server is intd's gNMI service (gNMI specification 0.10): the
// transport, authentication, and the Capabilities, Get, Set and Subscribe
// RPCs over any ygot generated model it is given. It knows YANG, not
// packets, and no model of its own: configuration goes down through an
// Applier (dtel's orchestrator, via server/intdmodel), state comes back up
// from it.
//
// # Use
//
//	srv, err := server.New(server.WithSchema(sc), server.WithTLS(cfg), server.WithCredentials(creds))
//	err = srv.AddTarget(ctx, "s1", applier, server.TargetOptions{SavePath: "s1.json", Initial: dflt})
//	err = srv.Serve(lis) // until srv.Close()
//
// One server serves any number of targets, each with its own Applier,
// running configuration and save file; the gNMI prefix target picks one.
// A request without a target gets the only target, or the one named by
// WithDefaultTarget. The target is echoed in responses only when the
// client sent one.
//
// # Models
//
// The model served is passed in (WithSchema: NewSchema over a ygot
// generated package): intd's is server/intdmodel's, the collector's
// server/collector's. Configuration and state are roots of the model's
// generated type; server/intdmodel adapts intd's typed Applier (gen.Device)
// and reads. Read-only targets (AddStateTarget) have their state polled
// and published like an Applier's, deletes included, and Set refused with
// UNIMPLEMENTED, the operation not being supported there. The package
// imports no generated model (tests/layering_test.go).
//
// # Datastore
//
// Each target keeps its running configuration (a root holding only
// config, as clients set it and as it is saved) and the latest
// Applier.State (only config false data), polled every
// WithStatePollInterval. What is published is the configuration with the
// YANG defaults in use filled in (defaults.go: RFC 7950 §7.6.1, the
// leaves of top-level containers and of existing list entries), so that
// Get returns a default in use and a leaf falling back to its default is
// an update to that value for subscribers, not a delete. A publish flattens whichever of the two
// changed into leaves (ygot.TogNMINotifications) and writes only the
// changed leaves, and deletes for vanished ones, into the gNMI cache
// (github.com/openconfig/gnmi/cache), whose client callback feeds
// github.com/openconfig/gnmi/match for ON_CHANGE subscriptions. ygot.Diff
// would do the same comparison but flattens both trees on every call;
// keeping the previous flattening halves the work, and flattening config
// and state separately means a state poll never walks the configuration.
// Get reads an immutable snapshot: configuration merged with state
// (ygot.MergeStructs) and per-data-type views, built lazily on the first
// Get after a publish, addressed with ytypes.GetNode and encoded with
// ygot.Marshal7951 (JSON, JSON_IETF) or ygot.TogNMINotifications (PROTO).
//
// Data types: CONFIG is config true data; STATE is config false data;
// OPERATIONAL is config false leaves that do not echo a config leaf (a
// leaf of a 'state' container whose sibling 'config' has no leaf of that
// name: counters, dataplane, ifindex, state-only lists such as drops).
// List keys are kept wherever their entry has data.
//
// Paths: origin unset, "openconfig" or a module name (intd-int,
// intd-int-metadata-semantics); module-qualified element names; "*" as a
// key value or an element name, "..." for any number of levels, omitted
// keys meaning "*". The origin a client gives (in the prefix or the path)
// is echoed in the prefix of the notifications answering it, in Get and
// Subscribe alike (§2.7: data is identified by <origin, path>).
//
// One rule for paths, following the specification's tables: a path that
// cannot be parsed, has bad keys, or names nodes the schema does not have
// (or that the request's use_models exclude) is not a valid path:
// INVALID_ARGUMENT in Get (§3.3.1), Subscribe (§3.5.2.4) and a Set's
// delete; in a Set's update and replace §3.4.7 makes it NOT_FOUND. A
// valid path without data is NOT_FOUND in Get (§3.3.4), sends nothing in
// Subscribe (which goes on watching for it), and is silently accepted by
// a delete (§3.4.6).
//
// use_models (§2.6) restricts Get and Subscribe to the nodes of the named
// modules (each served module's nodes are its top-level containers and
// all below them: none augments another), and leaves out leaves whose
// identity values are defined by a module outside the set. A model that
// is not served, or a version or organization other than Capabilities
// lists, is INVALID_ARGUMENT.
//
// # Set
//
// Values (values.go) are read the same whatever their encoding, checked
// against the leaf's YANG type with the data path in every message, and
// handed to ygot as RFC 7951 JSON. JSON_IETF is RFC 7951: integers of up
// to 32 bits are numbers, 64-bit integers strings (a number is taken
// too), identities "module:NAME" or NAME, booleans true/false, empty
// [null]. JSON (gNMI's plain encoding, whose RFC 7159 leaves spelling
// open) is read the same way, except that an integer or decimal64 of any
// width may also be a string holding it; PROTO scalars are read as JSON
// reads the same value. A number with a fraction or an exponent is never
// an integer; null is no value.
//
// Error messages speak YANG: the data path with its keys, the value and
// the type or restriction it breaks; a reference left dangling by a
// removal names what still uses it ("int-session md-5 is used by
// watchlist entry 10 (...)"). Values, keys and references are checked
// by the server before ygot sees them; errors.go rewrites what Go may
// still be in ygot's rare messages.
//
// A replace of a keyed list entry with {} (which would leave it without
// its keys, §3.4.4) and a value whose key leaves contradict the path's
// keys (§3.4.5) are INVALID_ARGUMENT.
//
// Deletes, then replaces, then updates, in request order, on a deep copy
// of the running configuration; missing config/<key> leaves of list
// entries are filled from the keys; then the whole candidate is validated
// (ΛValidate for types, ranges, patterns, mandatory and keys; leafrefs by
// leafref.go's one-walk checker, which follows ygot's rules, indexes
// absolute targets once per Set and falls back to ygot's walk for paths
// with predicates) and handed to Applier.Apply. Only when both succeed
// is it saved (atomically: temporary file, fsync, rename, fsync of the
// directory), made the running configuration and published with the
// state Apply produced. Codes:
// INVALID_ARGUMENT for bad paths, values, config-false targets and
// validation failures, and for Apply errors that mark the configuration
// refused (TargetOptions.InvalidErr, or an error with InvalidArgument()
// true); NOT_FOUND for update/replace paths not in the schema;
// UNIMPLEMENTED for ASCII, BYTES and protobuf message values; ABORTED when Apply
// fails otherwise (nothing changed); INTERNAL when saving fails (the
// dataplane is re-applied to the running configuration);
// PERMISSION_DENIED for read-only users; FAILED_PRECONDITION when the
// target's configuration is owned by an external store
// (TargetOptions.Owner, e.g. SONiC's CONFIG_DB through server/sonic), whose
// changes come in through OwnerSet, the same transaction. Deleting absent
// data succeeds.
//
// A Set's deadline is honoured: it waits for another Set only until its
// deadline, checks it between phases, and at the commit point (the save)
// a Set whose deadline has passed, or is too close for the answer to
// arrive in time, is rolled back (the dataplane re-applied) and fails
// with DEADLINE_EXCEEDED: a client whose deadline expires can count on
// nothing having changed, short of the answer being lost on its way.
//
// # Extensions
//
// Never ignored (extensions.go): depth (gnmi-depth.md) on Get and
// Subscribe keeps the leaves at most that many levels below each
// requested path (a container or a list entry is a level); commit
// confirmed (commit.go, gnmi-commit-confirmed.md) and master arbitration
// (gnmi-master-arbitration.md, per role, not persisted) on Set. Other
// extensions (history, config subscription, registered ones) are
// UNIMPLEMENTED; a served one on an RPC it does not apply to, or twice,
// INVALID_ARGUMENT. A commit request applies its Set and arms a rollback
// timer (default 10 minutes); confirm keeps it; cancel or expiry puts
// back the configuration from before it through the same transaction as
// a Set, save file included; while it is pending, other Sets are
// FAILED_PRECONDITION. The configuration to roll back to is saved next
// to the save file (".rollback"), so that a target started while a
// commit was pending rolls it back first.
//
// # Subscribe
//
// The gnmi subscribe package serves ONCE, POLL and STREAM ON_CHANGE over
// the cache but requires a prefix target, has no SAMPLE,
// heartbeat_interval or suppress_redundant, and stops a stalled client
// only with a send timeout; subscribe.go is the layer that adds them over
// the same cache and match. SAMPLE sends every sample_interval the covered leaves, and deletes
// for leaves gone since the previous sample; an interval below
// WithSampleIntervals' minimum is refused (INVALID_ARGUMENT), 0 gets the
// minimum. TARGET_DEFINED samples leaves under a 'counters' container and
// sends the others on change; it refuses a sample_interval. updates_only
// makes ONCE send only the sync_response, and POLL answer only the polls
// that follow. A STREAM ends only when the client cancels it: a client
// half-closing its side keeps its subscription. A POLL ends, once every
// poll is answered, when the client half-closes (no poll can follow); a
// second SubscriptionList on it is INVALID_ARGUMENT, as on a STREAM. A sample round is
// shared (sample.go): all samplers of one path, filter, encoding and
// echoed target use one cache walk and one encoding per cache generation
// (publish), as few SubscribeResponses of up to 1 MiB as the leaves'
// timestamps allow, kept pre-encoded so that sending one to another
// subscriber is a copy; suppress_redundant samplers compare the shared
// snapshot with their previous one and encode only the changes. Every subscription
// has one queue, coalesced by path and bounded in items and bytes by
// WithMaxPending: a publisher never blocks on it, and a subscriber that
// falls further behind is ended with RESOURCE_EXHAUSTED; so is one that
// accepts nothing for WithStallTimeout (its flow control window stays
// full), while it is stalled: the RPC ends without waiting for the
// blocked Send.
//
// # Limits
//
// Per client (peer address), WithClientLimits bounds the Subscribe RPCs
// open at once; per request, the paths of a Get and the subscriptions of
// a SubscriptionList (RESOURCE_EXHAUSTED past either). Identical
// subscriptions in one request are served once; a path a Get names
// twice is read and encoded once (and answered twice, §3.3.2). The YANG
// lists carry max-elements matching what the dataplanes hold.
//
// # Security
//
// WithTLS (TLSConfig builds one from files, or from a self-signed ECDSA
// certificate, and optional client CAs for mutual TLS; StateCert keeps a
// self-signed end-entity certificate and its 0600 key in a directory,
// made once and reused, so that clients can trust the file or pin its
// Fingerprint); WithCredentials (a file of "NAME ROLE
// pbkdf2-sha256$ITER$SALT$KEY" lines, refused when group or others may
// read it, checked against the "username"/"password" gRPC metadata;
// UNAUTHENTICATED on failure; read-only users may not Set). A name that
// is not a user costs the same PBKDF2 as a wrong password; failed logins
// are rate-limited per client (5, then one per 2 s), refused before any
// hashing past that, except for a password already verified. gRPC server
// reflection is registered.
//
// Audit: every Set is logged with the user (credentials user, client
// certificate subject, or anonymous), the peer address and its changes
// (INFO when applied, WARN with the reason when refused); failed logins,
// refused requests and refused TLS handshakes are logged at WARN with the
// peer and the reason.
//
// # Performance
//
// Measured figures and their history: docs/performance.md.
package server
