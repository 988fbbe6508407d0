package sonic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"github.com/redis/go-redis/v9"

	"github.com/intd-project/intd/gen"
)

// Server is what a Source needs from the gNMI server (*server.Server):
// the owner's Set, and Get for the state it copies to COUNTERS_DB.
type Server interface {
	OwnerSet(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error)
	Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error)
}

// Options configures a Source.
type Options struct {
	// DBs locates CONFIG_DB, STATE_DB and COUNTERS_DB (see Locate).
	DBs DBs
	// Target is the gNMI target configured.
	Target string
	// NodeID is the node-id used when CONFIG_DB has no DTEL|SWITCH_ID.
	NodeID uint32
	// StateInterval is how often counters are written to COUNTERS_DB
	// (default 1s).
	StateInterval time.Duration
	// Debounce is how long after a change notification CONFIG_DB is read,
	// so that an entry written field by field is read once (default
	// 150ms).
	Debounce time.Duration
	// Resync is how often CONFIG_DB is read without a notification, as a
	// safety net (default 60s; 1s when keyspace notifications cannot be
	// turned on).
	Resync time.Duration
	// Log is the logger (default slog.Default()).
	Log *slog.Logger
}

// Source keeps a gNMI target's configuration equal to CONFIG_DB's DTel
// tables and writes its state back to Redis.
type Source struct {
	o   Options
	log *slog.Logger

	cfgDB, stateDB, countersDB *redis.Client

	kick chan bool // a notification (false) or a (re)connection (true)

	// Sync state, owned by the sync loop.
	applied   *gen.Device // the configuration last applied
	lastCfg   Config
	lastOK    bool
	lastErr   string
	previous  map[Key]Fields
	logged    map[Key]string
	statuses  map[string]map[string]string // as written to STATE_DB
	polling   bool
	waiting   bool // for CONFIG_DB_INITIALIZED
	connected bool

	mu       sync.Mutex
	rules    map[uint32]Key  // watchlist sequence-id -> ACL_RULE, for counters
	counters map[string]bool // keys written to COUNTERS_DB
}

// New checks o and prepares the Redis clients; Run connects.
func New(o Options) (*Source, error) {
	if o.Target == "" {
		return nil, errors.New("sonic: no gNMI target")
	}
	if o.DBs.Config.Addr == "" {
		return nil, errors.New("sonic: no CONFIG_DB address")
	}
	if o.StateInterval <= 0 {
		o.StateInterval = time.Second
	}
	if o.Debounce <= 0 {
		o.Debounce = 150 * time.Millisecond
	}
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Source{
		o:          o,
		log:        o.Log.With("sonic", o.DBs.Config.Addr),
		cfgDB:      o.DBs.Config.client(),
		stateDB:    o.DBs.State.client(),
		countersDB: o.DBs.Counters.client(),
		kick:       make(chan bool, 1),
		logged:     map[Key]string{},
	}
	redis.SetLogger(redisLogger{s.log})
	return s, nil
}

// Owner names CONFIG_DB for the gNMI server's refusals of Set.
func (s *Source) Owner() string { return "SONiC " + s.o.DBs.Config.String() }

func (s *Source) signal(resync bool) {
	select {
	case s.kick <- resync:
	default:
		if resync {
			// Make sure the pending signal asks for a resync.
			select {
			case <-s.kick:
			default:
			}
			select {
			case s.kick <- true:
			default:
			}
		}
	}
}

// Run keeps the target in sync with CONFIG_DB until ctx ends: a full read
// at start, on every change notified (after Debounce), on every
// reconnection and every Resync; counters every StateInterval. Redis
// going away leaves the running configuration as it is; reconnection is
// retried with backoff.
func (s *Source) Run(ctx context.Context, srv Server) error {
	defer func() {
		s.cfgDB.Close()
		s.stateDB.Close()
		s.countersDB.Close()
	}()
	s.log.Info("configuration owned by SONiC CONFIG_DB", "config_db", s.o.DBs.Config.String(),
		"state_db", s.o.DBs.State.String(), "counters_db", s.o.DBs.Counters.String(), "target", s.o.Target)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.watch(ctx) }()
	go func() { defer wg.Done(); s.countersLoop(ctx, srv) }()
	s.syncLoop(ctx, srv)
	wg.Wait()
	return nil
}

// backoff doubles from 100ms to max.
type backoff struct {
	d, max time.Duration
}

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = 100 * time.Millisecond
	} else if b.d *= 2; b.d > b.max {
		b.d = b.max
	}
	return b.d
}

func (s *Source) syncLoop(ctx context.Context, srv Server) {
	resync := time.NewTicker(s.o.Resync)
	defer resync.Stop()
	var timer *time.Timer
	var fire <-chan time.Time
	arm := func(d time.Duration) {
		if fire == nil {
			timer = time.NewTimer(d)
			fire = timer.C
		}
	}
	force := true
	arm(0)
	bo := backoff{max: 5 * time.Second}
	polling := false
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case full := <-s.kick:
			force = force || full
			arm(s.o.Debounce)
		case <-resync.C:
			arm(0)
		case <-fire:
			fire = nil
			err := s.syncOnce(ctx, srv, force)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if msg := err.Error(); msg != s.lastErr {
					s.log.Error("syncing from CONFIG_DB; retrying", "err", err)
					s.lastErr = msg
				}
				arm(bo.next())
				continue
			}
			force = false
			bo = backoff{max: bo.max}
			if s.polling != polling {
				polling = s.polling
				every := s.o.Resync
				if polling {
					every = time.Second
				}
				resync.Reset(every)
			}
		}
	}
}

// errRedis marks errors talking to Redis (as opposed to applying).
type errRedis struct{ err error }

func (e errRedis) Error() string { return "redis: " + e.err.Error() }
func (e errRedis) Unwrap() error { return e.err }

// syncOnce reads CONFIG_DB and, if it changed (or force), applies it.
func (s *Source) syncOnce(ctx context.Context, srv Server, force bool) error {
	if err := s.ensureNotify(ctx); err != nil {
		s.setConnected(false)
		return errRedis{err}
	}
	init, err := s.cfgDB.Get(ctx, initKey).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		s.setConnected(false)
		return errRedis{err}
	case init != "1":
		if !s.waiting {
			s.log.Info("waiting for CONFIG_DB to be loaded", initKey, init)
		}
		s.waiting = true
		s.writeSyncState(ctx, "waiting", nil, "")
		return nil
	}
	s.waiting = false
	cfg, err := readConfig(ctx, s.cfgDB, s.o.DBs.Config.Sep)
	if err != nil {
		s.setConnected(false)
		return errRedis{err}
	}
	if !s.setConnected(true) {
		force = true
	}
	if force {
		// At start and after reconnections Redis may have lost what
		// intd wrote (a restart without STATE_DB): write it all again.
		s.statuses = nil
		s.mu.Lock()
		s.counters = nil
		s.mu.Unlock()
	}
	if !force && s.lastOK && cfg.Equal(s.lastCfg) {
		return nil
	}
	start := time.Now()
	res, err := Resolve(ctx, cfg, s.previous, TranslateOptions{NodeID: s.o.NodeID}, s.apply(srv))
	if err != nil {
		s.lastOK = false
		s.writeSyncState(ctx, "error", nil, err.Error())
		return err
	}
	s.lastCfg, s.lastOK, s.lastErr = cfg, true, ""
	s.previous = res.Used
	s.mu.Lock()
	s.rules = res.Rules
	s.mu.Unlock()
	s.logStatuses(res)
	s.log.Info("configuration applied from CONFIG_DB", "entries", len(res.Statuses), "refused", res.Refused(),
		"attempts", res.Attempts, "took", time.Since(start).Round(time.Microsecond))
	if err := s.writeStatuses(ctx, res); err != nil {
		s.log.Warn("writing entry statuses to STATE_DB", "err", err)
	}
	s.writeSyncState(ctx, "in-sync", res, "")
	return nil
}

// setConnected records whether Redis answers and reports whether it did
// before; coming back, what Redis may have lost is rewritten.
func (s *Source) setConnected(up bool) bool {
	was := s.connected
	s.connected = up
	if up && !was {
		s.log.Info("connected to CONFIG_DB")
	}
	if !up && was {
		s.log.Warn("lost CONFIG_DB: keeping the running configuration, reconnecting")
	}
	return was
}

func (s *Source) logStatuses(res *Result) {
	seen := map[Key]bool{}
	for _, st := range res.Statuses {
		seen[st.Key] = true
		sig := st.State() + "|" + st.Field + "|" + st.Reason + "|" + st.InEffect()
		if s.logged[st.Key] == sig {
			continue
		}
		s.logged[st.Key] = sig
		if st.Applied {
			continue
		}
		s.log.Warn("CONFIG_DB entry refused", "key", st.Key.String(), "field", st.Field, "reason", st.Reason,
			"yang_path", st.Path, "in_effect", st.InEffect())
	}
	for k := range s.logged {
		if !seen[k] {
			delete(s.logged, k)
		}
	}
}

// SetRequest is the gNMI Set that makes dev's /int the target's.
func SetRequest(target string, dev *gen.Device) (*gpb.SetRequest, error) {
	path := &gpb.Path{Elem: []*gpb.PathElem{{Name: "int"}}}
	req := &gpb.SetRequest{Prefix: &gpb.Path{Target: target}}
	if dev.GetInt() == nil {
		req.Delete = []*gpb.Path{path}
		return req, nil
	}
	js, err := ygot.Marshal7951(dev.Int, &ygot.RFC7951JSONConfig{AppendModuleName: true})
	if err != nil {
		return nil, fmt.Errorf("encoding /int: %w", err)
	}
	req.Replace = []*gpb.Update{{Path: path, Val: &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: js}}}}
	return req, nil
}

// apply sends what changed since the configuration last applied (all of
// /int the first time: the target may hold a saved configuration).
func (s *Source) apply(srv Server) ApplyFunc {
	return func(ctx context.Context, dev *gen.Device) error {
		req, err := DiffRequest(s.o.Target, s.applied, dev)
		if err != nil {
			return err
		}
		if req != nil {
			if _, err := srv.OwnerSet(ctx, req); err != nil {
				return err
			}
		}
		s.applied = dev
		return nil
	}
}

// ensureNotify turns on the keyspace notifications of hashes, strings
// (CONFIG_DB_INITIALIZED) and generic commands (DEL, RENAME) if Redis has
// them off; where CONFIG SET is not
// allowed, CONFIG_DB is polled every second instead.
func (s *Source) ensureNotify(ctx context.Context) error {
	res, err := s.cfgDB.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		if isServerError(err) {
			s.setPolling(fmt.Sprintf("CONFIG GET: %v", err))
			return nil
		}
		return err
	}
	flags := res["notify-keyspace-events"]
	missing := ""
	if !strings.Contains(flags, "K") {
		missing += "K"
	}
	if !strings.Contains(flags, "A") {
		for _, c := range "hg$" {
			if !strings.ContainsRune(flags, c) {
				missing += string(c)
			}
		}
	}
	if missing == "" {
		s.polling = false
		return nil
	}
	if err := s.cfgDB.ConfigSet(ctx, "notify-keyspace-events", flags+missing).Err(); err != nil {
		if isServerError(err) {
			s.setPolling(fmt.Sprintf("CONFIG SET: %v", err))
			return nil
		}
		return err
	}
	s.log.Info("turned on Redis keyspace notifications", "notify-keyspace-events", flags+missing, "was", flags)
	s.polling = false
	return nil
}

func (s *Source) setPolling(why string) {
	if !s.polling {
		s.log.Warn("cannot turn on Redis keyspace notifications: polling CONFIG_DB every second", "why", why)
	}
	s.polling = true
}

func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// watch follows CONFIG_DB's keyspace notifications of the DTel tables.
func (s *Source) watch(ctx context.Context) {
	prefix := fmt.Sprintf("__keyspace@%d__:", s.o.DBs.Config.ID)
	sep := globEscape(s.o.DBs.Config.Sep)
	patterns := []string{prefix + "DTEL*", prefix + TableACLTable + sep + "*", prefix + TableACLRule + sep + "*", prefix + initKey}
	ps := s.cfgDB.PSubscribe(ctx, patterns...)
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	bo := backoff{max: 5 * time.Second}
	down := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, 30*time.Second)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = ps.Ping(ctx) // a dead connection fails here and reconnects
				continue
			}
			if !down {
				s.log.Warn("CONFIG_DB notifications lost; reconnecting", "err", err)
				down = true
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(bo.next()):
			}
			continue
		}
		bo = backoff{max: bo.max}
		switch m := msg.(type) {
		case *redis.Subscription:
			// (Re)subscribed: changes may have been missed.
			if down {
				s.log.Info("CONFIG_DB notifications back")
			}
			down = false
			s.signal(true)
		case *redis.Message:
			key := strings.TrimPrefix(m.Channel, prefix)
			table, _, _ := strings.Cut(key, s.o.DBs.Config.Sep)
			if relevant(table) || key == initKey {
				s.signal(false)
			}
		}
	}
}

// writeSyncState writes DTEL_SYNC_TABLE|<target> to STATE_DB.
func (s *Source) writeSyncState(ctx context.Context, state string, res *Result, errMsg string) {
	f := map[string]any{"state": state, "last_sync": time.Now().UTC().Format(time.RFC3339Nano), "error": errMsg}
	if res != nil {
		f["entries"] = len(res.Statuses)
		f["refused"] = res.Refused()
	}
	key := SyncTable + s.o.DBs.State.Sep + s.o.Target
	if err := s.stateDB.HSet(ctx, key, f).Err(); err != nil {
		s.log.Debug("writing sync state to STATE_DB", "err", err)
	}
}

// STATE_DB tables intd writes.
const (
	// StatusTable holds one hash per DTel entry of CONFIG_DB:
	// DTEL_STATUS_TABLE|<CONFIG_DB table>|<CONFIG_DB key>.
	StatusTable = "DTEL_STATUS_TABLE"
	// SyncTable holds DTEL_SYNC_TABLE|<gNMI target>: the state of the
	// last synchronisation.
	SyncTable = "DTEL_SYNC_TABLE"
)

// statusFields is an entry's status hash.
func statusFields(st *Status) map[string]string {
	return map[string]string{
		"status":    st.State(),
		"in_effect": st.InEffect(),
		"field":     st.Field,
		"reason":    st.Reason,
		"yang_path": st.Path,
		"paths":     strings.Join(st.Paths, " "),
	}
}

// writeStatuses writes the entries' statuses that changed and deletes
// those of entries gone.
func (s *Source) writeStatuses(ctx context.Context, res *Result) error {
	sep := s.o.DBs.State.Sep
	want := map[string]map[string]string{}
	for _, st := range res.Statuses {
		want[StatusTable+sep+st.Key.Table+sep+st.Key.Name] = statusFields(st)
	}
	var stale []string
	if s.statuses == nil {
		// Those of an earlier run.
		keys, err := scanKeys(ctx, s.stateDB, StatusTable+globEscape(sep)+"*")
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, ok := want[k]; !ok {
				stale = append(stale, k)
			}
		}
	} else {
		for k := range s.statuses {
			if _, ok := want[k]; !ok {
				stale = append(stale, k)
			}
		}
	}
	pipe := s.stateDB.TxPipeline()
	if len(stale) > 0 {
		pipe.Del(ctx, stale...)
	}
	n := 0
	for k, f := range want {
		if old, ok := s.statuses[k]; ok && maps.Equal(old, f) {
			continue
		}
		pipe.Del(ctx, k)
		pipe.HSet(ctx, k, f)
		n++
	}
	if n+len(stale) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		s.statuses = nil
		return err
	}
	s.statuses = want
	return nil
}
