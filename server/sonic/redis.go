package sonic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DB is one of SONiC's Redis databases.
type DB struct {
	Name string // e.g. CONFIG_DB
	// Network is "unix" or "tcp"; Addr the socket path or host:port.
	Network, Addr string
	ID            int
	Sep           string // key separator: "|" or ":"
}

func (d DB) String() string {
	return fmt.Sprintf("%s (redis %s %s, db %d)", d.Name, d.Network, d.Addr, d.ID)
}

// DBs are the databases intd uses.
type DBs struct {
	Config, State, Counters DB
}

// SONiC's default database numbers (sonic-swss-common schema.h).
const (
	configDBID   = 4
	stateDBID    = 6
	countersDBID = 2
)

// ParseAddr reads a Redis address: a unix socket path (absolute, or
// prefixed unix:) or host:port.
func ParseAddr(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, "unix:"):
		return "unix", strings.TrimPrefix(addr, "unix:"), nil
	case strings.HasPrefix(addr, "/"):
		return "unix", addr, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("redis address %q: want host:port or a unix socket path: %w", addr, err)
	}
	return "tcp", addr, nil
}

// databaseConfig is SONiC's database_config.json.
type databaseConfig struct {
	Instances map[string]struct {
		Hostname string `json:"hostname"`
		Port     int    `json:"port"`
		Socket   string `json:"unix_socket_path"`
	} `json:"INSTANCES"`
	Databases map[string]struct {
		ID        int    `json:"id"`
		Separator string `json:"separator"`
		Instance  string `json:"instance"`
	} `json:"DATABASES"`
}

// Locate finds CONFIG_DB, STATE_DB and COUNTERS_DB: in SONiC's
// database_config.json when dbConfig names it, else at SONiC's default
// numbers. addr, when given, is the Redis server of CONFIG_DB (and of the
// databases that share its instance); without it the file's address of
// the instance is used, its unix socket when that exists.
func Locate(addr, dbConfig string) (DBs, error) {
	var net, a string
	if addr != "" {
		var err error
		if net, a, err = ParseAddr(addr); err != nil {
			return DBs{}, err
		}
	}
	if dbConfig == "" {
		if addr == "" {
			return DBs{}, errors.New("no CONFIG_DB address and no database_config.json")
		}
		return DBs{
			Config:   DB{"CONFIG_DB", net, a, configDBID, "|"},
			State:    DB{"STATE_DB", net, a, stateDBID, "|"},
			Counters: DB{"COUNTERS_DB", net, a, countersDBID, ":"},
		}, nil
	}
	data, err := os.ReadFile(dbConfig)
	if err != nil {
		return DBs{}, fmt.Errorf("SONiC database config: %w", err)
	}
	var dc databaseConfig
	if err := json.Unmarshal(data, &dc); err != nil {
		return DBs{}, fmt.Errorf("SONiC database config %s: %w", dbConfig, err)
	}
	cfgInst := dc.Databases["CONFIG_DB"].Instance
	find := func(name, sep string) (DB, error) {
		d, ok := dc.Databases[name]
		if !ok {
			return DB{}, fmt.Errorf("SONiC database config %s: no %s", dbConfig, name)
		}
		if d.Separator != "" {
			sep = d.Separator
		}
		db := DB{Name: name, ID: d.ID, Sep: sep}
		if addr != "" && d.Instance == cfgInst {
			db.Network, db.Addr = net, a
			return db, nil
		}
		in, ok := dc.Instances[d.Instance]
		if !ok {
			return DB{}, fmt.Errorf("SONiC database config %s: %s is on instance %q, which is not listed", dbConfig, name, d.Instance)
		}
		if in.Socket != "" {
			if _, err := os.Stat(in.Socket); err == nil || in.Hostname == "" {
				db.Network, db.Addr = "unix", in.Socket
				return db, nil
			}
		}
		if in.Hostname == "" || in.Port == 0 {
			return DB{}, fmt.Errorf("SONiC database config %s: instance %q has no address", dbConfig, d.Instance)
		}
		db.Network, db.Addr = "tcp", netJoin(in.Hostname, in.Port)
		return db, nil
	}
	var dbs DBs
	if dbs.Config, err = find("CONFIG_DB", "|"); err != nil {
		return DBs{}, err
	}
	if dbs.State, err = find("STATE_DB", "|"); err != nil {
		return DBs{}, err
	}
	if dbs.Counters, err = find("COUNTERS_DB", ":"); err != nil {
		return DBs{}, err
	}
	return dbs, nil
}

func netJoin(host string, port int) string { return net.JoinHostPort(host, fmt.Sprint(port)) }

// client opens a go-redis client on db. RESP2 keeps older SONiC Redis
// servers (5.x) working; the short timeouts let a vanished server be
// noticed quickly, and retries are the caller's (with backoff).
func (d DB) client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Network:         d.Network,
		Addr:            d.Addr,
		DB:              d.ID,
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     5 * time.Second,
		WriteTimeout:    5 * time.Second,
		MaxRetries:      -1,
		PoolSize:        4,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
}

// redisLogger sends go-redis's own messages to the structured log.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Debug("redis client", "msg", fmt.Sprintf(format, v...))
}

// initKey is the key SONiC sets to "1" once CONFIG_DB is loaded.
const initKey = "CONFIG_DB_INITIALIZED"

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func scanKeys(ctx context.Context, c *redis.Client, match string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}

// readConfig reads the DTel tables of CONFIG_DB: every DTEL* table, ACL
// tables and the rules of the watchlist tables.
func readConfig(ctx context.Context, c *redis.Client, sep string) (Config, error) {
	dtel, err := scanKeys(ctx, c, "DTEL*")
	if err != nil {
		return nil, err
	}
	tables, err := scanKeys(ctx, c, TableACLTable+globEscape(sep)+"*")
	if err != nil {
		return nil, err
	}
	cfg := Config{}
	if err := hgetAll(ctx, c, sep, append(dtel, tables...), cfg); err != nil {
		return nil, err
	}
	var rules []string
	watch := map[string]bool{}
	for name := range cfg[TableACLTable] {
		if cfg.isWatchTable(name) {
			watch[name] = true
		}
	}
	if cfg.isWatchTable(WatchlistType) {
		watch[WatchlistType] = true
	}
	for t := range watch {
		keys, err := scanKeys(ctx, c, TableACLRule+globEscape(sep)+globEscape(t)+globEscape(sep)+"*")
		if err != nil {
			return nil, err
		}
		rules = append(rules, keys...)
	}
	if err := hgetAll(ctx, c, sep, rules, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func hgetAll(ctx context.Context, c *redis.Client, sep string, keys []string, cfg Config) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isWrongType(err) {
		return err
	}
	for i, k := range keys {
		table, name, ok := strings.Cut(k, sep)
		if !ok || !relevant(table) {
			continue
		}
		m, err := cmds[i].Result()
		if err != nil || len(m) == 0 {
			continue // not a hash, or deleted meanwhile
		}
		f := Fields{}
		for field, v := range m {
			if field == "NULL" && v == "NULL" {
				continue // SONiC's placeholder of an entry without fields
			}
			f[strings.TrimSuffix(field, "@")] = v
		}
		cfg.set(Key{table, name}, f)
	}
	return nil
}

func isWrongType(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") }
