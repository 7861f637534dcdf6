package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ConfigProblem is a setting of a Redis server under which the server may
// forget claims and stored outcomes (on an eviction, a restart or a crash),
// so that the retries of completed operations execute them again. Store.Check
// reports them. It is a plain value of strings, safe to copy and to share:
// it may be read from several goroutines at once.
type ConfigProblem struct {
	// Addr is the address of the server, as the client dials it; with a
	// cluster client, the address of one primary. It is "" when the client
	// is of a kind that does not tell.
	Addr string
	// Setting is the Redis configuration parameter, as CONFIG GET spells
	// it: "maxmemory-policy", "appendonly" or "appendfsync".
	Setting string
	// Value is the setting's value as the server reported it, or "" when it
	// could not be read (CONFIG and INFO refused); Why then says so.
	Value string
	// Why is one sentence on what can go wrong and what to set instead.
	Why string
}

// String returns the problem on one line, without Addr:
// "maxmemory-policy is allkeys-lru: Redis evicts...", or "appendonly cannot
// be read: ..." when Value is "".
func (p ConfigProblem) String() string {
	if p.Value == "" {
		return p.Setting + " cannot be read: " + p.Why
	}
	return p.Setting + " is " + p.Value + ": " + p.Why
}

// Check reads the settings of the Redis server (every primary, with a
// *redis.ClusterClient) that decide
// whether it keeps what the store wrote, and returns one ConfigProblem per
// setting that may make it forget entries; none when all is well. It checks:
//
//   - maxmemory-policy: anything but noeviction evicts keys at maxmemory.
//     The volatile-* policies are no safer, because every entry has a TTL.
//   - persistence: appendonly no is reported, with Why telling whether RDB
//     snapshots (save) are taken at least: without either, a restart forgets
//     everything; with snapshots only, a crash forgets what was written since
//     the last one.
//   - appendfsync no, under which the kernel decides when the AOF reaches the
//     disk. appendfsync everysec, the Redis default, is not reported: a crash
//     of the machine (not of Redis alone, whose writes are already in the
//     kernel) loses the last second or two of records, the trade-off most
//     deployments choose; set always where that window matters too.
//
// Settings are read with CONFIG GET. Where CONFIG is disabled, renamed or
// not permitted (managed Redis services often do that), Check falls back to
// INFO memory and INFO persistence, which tell the policy and whether AOF is
// on but not whether snapshots are taken; what neither can tell is reported
// as a problem whose Value is "" ("cannot be read"), not as an error.
//
// Check returns an error only when it could not talk to a server at all
// (unreachable, timeout, ctx done): the caller then knows nothing. It sends a
// few commands to each server and changes nothing; call it once at start-up.
func (s *Store) Check(ctx context.Context) ([]ConfigProblem, error) {
	var (
		mu       sync.Mutex
		problems []ConfigProblem
	)
	check := func(ctx context.Context, c redis.Cmdable, addr string) error {
		found, err := checkServer(ctx, c, addr)
		mu.Lock()
		problems = append(problems, found...)
		mu.Unlock()
		return err
	}
	eachClient := func(ctx context.Context, c *redis.Client) error {
		return check(ctx, c, c.Options().Addr)
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, eachClient)
	case *redis.Client:
		err = eachClient(ctx, c)
	default:
		err = check(ctx, c, "")
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: check: %w", err)
	}
	// Primaries answer concurrently; report them in a stable order.
	slices.SortStableFunc(problems, func(a, b ConfigProblem) int { return cmp.Compare(a.Addr, b.Addr) })
	return problems, nil
}

// checkServer reads one server's settings and judges them.
func checkServer(ctx context.Context, c redis.Cmdable, addr string) ([]ConfigProblem, error) {
	cfg, err := readConfig(ctx, c)
	if err != nil {
		return nil, err
	}
	var problems []ConfigProblem
	add := func(setting, value, why string) {
		problems = append(problems, ConfigProblem{Addr: addr, Setting: setting, Value: value, Why: why})
	}

	switch policy, ok := cfg.values["maxmemory-policy"]; {
	case !ok:
		add("maxmemory-policy", "", "CONFIG GET and INFO memory were refused ("+cfg.refused+"), so whether Redis evicts entries is unknown; make sure it is noeviction")
	case policy != "noeviction":
		add("maxmemory-policy", policy, evictionWhy)
	}

	aof, ok := cfg.values["appendonly"]
	switch {
	case !ok:
		add("appendonly", "", "CONFIG GET and INFO persistence were refused ("+cfg.refused+"), so whether Redis persists entries is unknown; without AOF or RDB snapshots, "+noPersistenceWhy)
	case aof == "no":
		switch save, ok := cfg.values["save"]; {
		case !ok:
			add("appendonly", "no", "AOF is off, and whether RDB snapshots are taken cannot be read ("+cfg.refused+"); "+noPersistenceWhy)
		case save == "":
			add("appendonly", "no", "neither AOF nor RDB snapshots (save) are configured; "+noPersistenceWhy)
		default:
			add("appendonly", "no", `only RDB snapshots are taken (save "`+save+`"), so a crash forgets the claims and outcomes written since the last one, and their retries execute the operations again; set appendonly yes`)
		}
	default:
		if cfg.values["appendfsync"] == "no" {
			add("appendfsync", "no", "the kernel writes the AOF to disk when it likes (often 30 s later), so a crash of the machine forgets the claims and outcomes of those seconds, and their retries execute the operations again; set appendfsync everysec or always")
		}
	}
	return problems, nil
}

const (
	evictionWhy = "Redis evicts keys when it reaches maxmemory (every entry of this store has a TTL, so volatile-* policies evict them too), and the retry of an operation whose claim or outcome was evicted executes it again; " +
		"set noeviction, under which a full Redis refuses writes and the middleware answers 503"
	noPersistenceWhy = "a restart forgets every claim and stored outcome, and the retries in flight execute their operations again; set appendonly yes"
)

// serverConfig is what could be read of one server's settings.
type serverConfig struct {
	// values holds the settings read, by CONFIG GET name; a setting that
	// could not be read is absent.
	values map[string]string
	// refused says why CONFIG GET (and INFO, where it failed too) did not
	// answer, when it did not.
	refused string
}

// readConfig reads the settings with CONFIG GET or, when the server refuses
// CONFIG, what INFO tells of them. Only a failure to reach the server is an
// error; a refusal is recorded in refused.
func readConfig(ctx context.Context, c redis.Cmdable) (serverConfig, error) {
	cfg := serverConfig{values: make(map[string]string)}
	params := []string{"maxmemory-policy", "appendonly", "save", "appendfsync"}
	cmds := make([]*redis.MapStringStringCmd, len(params))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range params {
			cmds[i] = p.ConfigGet(ctx, name)
		}
		return nil
	})
	if err == nil {
		for _, cmd := range cmds {
			for name, v := range cmd.Val() {
				cfg.values[name] = v
			}
		}
		return cfg, nil
	}
	if !isReply(err) {
		return cfg, err
	}
	cfg.refused = "CONFIG GET: " + strings.TrimSpace(err.Error())

	for _, section := range []string{"memory", "persistence"} {
		info, err := c.Info(ctx, section).Result()
		if err != nil {
			if !isReply(err) {
				return cfg, err
			}
			cfg.refused += "; INFO " + section + ": " + strings.TrimSpace(err.Error())
			continue
		}
		fields := infoFields(info)
		if v, ok := fields["maxmemory_policy"]; ok {
			cfg.values["maxmemory-policy"] = v
		}
		switch fields["aof_enabled"] {
		case "1":
			cfg.values["appendonly"] = "yes"
		case "0":
			cfg.values["appendonly"] = "no"
		}
	}
	return cfg, nil
}

// infoFields parses the "name:value" lines of an INFO answer.
func infoFields(info string) map[string]string {
	fields := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(name, "#") {
			fields[name] = value
		}
	}
	return fields
}

// isReply reports whether err is an error reply of the Redis server (the
// command is unknown, renamed or not permitted), as opposed to a failure to
// reach it.
func isReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}
