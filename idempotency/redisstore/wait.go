package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
)

// shortPrimaries remembers the primaries (by address; "" for a client that
// is not a cluster) whose last WAIT came back with fewer replicas than
// WithWait asks for: a primary promoted after a failover has no replica
// until the failed node comes back. Writes to such a primary ask for ROLE
// in their round trip instead of WAIT, so they learn at once whether
// replicas are back, instead of waiting out the WAIT timeout on every
// write. The zero value is empty; it is safe for concurrent use.
type shortPrimaries struct{ m sync.Map }

// runWait sends the script and WAIT in one pipeline to the primary that owns
// key. On a primary known to lack replicas it sends ROLE and the script
// instead, and sends WAIT after them, over the same connection, only if
// ROLE lists enough replicas, or refuses to answer (an ACL that denies
// it): then WAIT answers. A WAIT that came back short after a
// NOSCRIPT marks the primary as lacking replicas before the script is sent
// again, so that a write on a primary without replicas (a promoted one) does
// not wait out the timeout twice. A WAIT that may outlast the client's
// ReadTimeout (see waitAlone) also goes after the script, over the same
// connection. An ASK reply (the key's slot is migrating and the key is, or
// goes, on the target) is followed: the pipeline goes again to the
// target, after ASKING. When fewer replicas
// acknowledge, or WAIT fails after the write, the error matches
// ErrNotReplicated and the script's result comes with it. The pipeline is
// sent and read under sctx; a WAIT sent after it, under ctx, whose end
// then fails it as above (see Store.acquire). The script's command is
// kept in sent, when not nil (see sentScript).
func (s *Store) runWait(ctx, sctx context.Context, sent *sentScript, sc *script, key string, wrote func(any) bool, args ...string) (any, error) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		client := s.rdb.(*redis.Client) // New takes no other client with WithWait (see waitable)
		return s.runWaitOn(ctx, sctx, sent, s.rdb, client, "", false, sc, key, wrote, args...)
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	res, err := s.runWaitOn(ctx, sctx, sent, node, node, node.Options().Addr, false, sc, key, wrote, args...)
	target, ok := askTarget(err)
	if !ok {
		return res, err
	}
	// The slot is migrating and its owner no longer holds the key: the
	// node it is moving to does, or will take a new one. go-redis follows
	// such an ASK for the commands it routes itself, never for a
	// pipeline sent to one node, and a reload of the slot map does not
	// help, as the slot stays the source's until the migration ends
	// (for good, if the reshard was interrupted): without following it,
	// every write to a key already moved would fail, renewals and
	// completions of claims in progress included. The target is asked
	// over a client of its own, closed after the write, as it may be a
	// node the cluster client's map does not list yet (one taking its
	// first slots); ASK is rare enough for the dial not to matter.
	opt := *node.Options()
	opt.Addr, opt.NodeAddress = target, ""
	// Options.init reads 0 as the 5 s default, and MaxRetries 0 as 3
	// retries; the node's 0 means none (a cluster's nodes never resend:
	// the cluster client does, by its own MaxRetries).
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = -1
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = -1
	}
	if opt.MaxRetries == 0 {
		opt.MaxRetries = -1
	}
	opt.PoolSize, opt.MinIdleConns = 1, 0
	at := redis.NewClient(&opt)
	defer at.Close()
	return s.runWaitOn(ctx, sctx, sent, at, at, target, true, sc, key, wrote, args...)
}

// askTarget returns the node that an ASK reply in err redirects to.
func askTarget(err error) (string, bool) {
	if err == nil || !redis.HasErrorPrefix(err, "ASK ") {
		return "", false
	}
	f := strings.Fields(err.Error())
	if len(f) != 3 {
		return "", false
	}
	return f[2], true
}

// runWaitOn is runWait on the node c (client, when it is a *redis.Client
// rather than a failover client, at address addr: "" for a client that is
// not a cluster); asking sends ASKING before the script, which an
// importing node needs to take a key of a slot it does not own yet.
func (s *Store) runWaitOn(ctx, sctx context.Context, sent *sentScript, c interface {
	Pipeline() redis.Pipeliner
	Do(ctx context.Context, args ...any) *redis.Cmd
}, client *redis.Client, addr string, asking bool, sc *script, key string, wrote func(any) bool, args ...string) (any, error) {
	var pinned *redis.Conn
	// sctx, which the pipeline is read under, may end first (see
	// Store.acquire).
	alone := s.waitAlone(ctx, client) || s.waitAlone(sctx, client)
	for _, byHash := range []bool{true, false} {
		_, short := s.short.m.Load(addr)
		if (short || alone) && client != nil && pinned == nil {
			// WAIT counts the replicas that acknowledged the last write
			// of its own connection. When ROLE goes first, WAIT follows
			// in a round trip of its own, which the pool may give another
			// connection, one whose last write the replicas acknowledged
			// long ago: it would answer at once that the write is
			// replicated. So the pipeline and WAIT share one connection.
			pinned = client.Conn()
			defer pinned.Close()
			c = pinned
		}
		pipe := c.Pipeline()
		var role, wait *redis.Cmd
		if short {
			role = pipe.Do(sctx, "ROLE")
		}
		if asking {
			pipe.Do(sctx, "ASKING") // just before the script: ASKING holds for one command
		}
		cmd := sc.cmd(sctx, byHash, key, args)
		sent.keep(cmd)
		_ = pipe.Process(sctx, cmd)
		if !short && !alone {
			wait = pipe.Do(sctx, "WAIT", s.cfg.waitN, millis(s.cfg.waitTimeout))
		}
		_, _ = pipe.Exec(sctx) // errors are read per command below
		res, err := cmd.Result()
		if byHash && isNoScript(err) {
			// Nothing was written, but the WAIT after it waited for the
			// connection's earlier writes: had it come back short, the
			// primary lacks replicas (a promoted one, which lacks the
			// scripts too, as Redis does not replicate them). The EVAL
			// then asks ROLE instead, rather than wait out the timeout
			// a second time.
			if wait != nil {
				if n, err := wait.Int64(); err == nil && n < int64(s.cfg.waitN) {
					s.short.m.Store(addr, true)
				}
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if !wrote(res) {
			return res, nil
		}
		if short {
			n, err := connectedReplicas(role)
			var refused redis.Error
			switch {
			case errors.As(err, &refused):
				// ROLE is an @admin and @dangerous command, which an
				// application's ACL often denies (NOPERM): WAIT, which
				// it allows, answers instead, on the connection that
				// wrote.
			case err != nil:
				return nil, err
			case n < s.cfg.waitN:
				return res, s.notReplicated(addr, fmt.Sprintf("%d connected", n))
			}
			s.short.m.Delete(addr) // replicas are back (or ROLE is denied): wait for them again
		}
		var n int64
		switch {
		case wait != nil:
			n, err = wait.Int64()
		case pinned != nil:
			// go-redis's Wait reads under WAIT's timeout (see waitAlone).
			n, err = pinned.Wait(ctx, s.cfg.waitN, time.Duration(millis(s.cfg.waitTimeout))*time.Millisecond).Result()
		default:
			n, err = c.Do(ctx, "WAIT", s.cfg.waitN, millis(s.cfg.waitTimeout)).Int64()
		}
		if err != nil {
			// The write is applied and its answer in hand, but not known
			// to be replicated (the context's deadline, under
			// ContextTimeoutEnabled, or a broken connection ended WAIT):
			// an acquired claim is given back, as for a short WAIT.
			return res, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
		}
		if n < int64(s.cfg.waitN) {
			s.short.m.Store(addr, true)
			return res, s.notReplicated(addr, fmt.Sprintf("%d acknowledged within %v", n, s.cfg.waitTimeout))
		}
		return res, nil
	}
	panic("unreachable")
}

// waitSlack is what runWait leaves of the client's ReadTimeout to the
// write and the network, beside WAIT, in one pipeline (a WAIT may also
// answer a little after its timeout).
const waitSlack = 500 * time.Millisecond

// waitAlone reports whether WAIT must go in a round trip of its own, after
// the write, rather than in the write's pipeline: go-redis reads a
// pipeline under the client's ReadTimeout (5 s by default) whatever it
// holds, and WAIT's own command under its timeout plus ten seconds. In the
// pipeline, a WAIT that outlasted the ReadTimeout (0, for ever, included)
// ended in an i/o timeout, the write's answer lost with it: an acquired
// claim was not given back, and no write reported ErrNotReplicated. A
// client with ContextTimeoutEnabled reads under the context's deadline
// too, so a deadline that WAIT may outlast sends it alone as well.
func (s *Store) waitAlone(ctx context.Context, client *redis.Client) bool {
	if client == nil {
		return false
	}
	opt := client.Options()
	if d, ok := ctx.Deadline(); ok && opt.ContextTimeoutEnabled &&
		(s.cfg.waitTimeout <= 0 || time.Now().Add(s.cfg.waitTimeout+waitSlack).After(d)) {
		return true
	}
	read := opt.ReadTimeout
	return read > 0 && (s.cfg.waitTimeout <= 0 || s.cfg.waitTimeout+waitSlack > read)
}

// notReplicated is the ErrNotReplicated error of a write to the primary at
// addr; what says how many replicas it got.
func (s *Store) notReplicated(addr, what string) error {
	at := ""
	if addr != "" {
		at = " on primary " + addr
	}
	return fmt.Errorf("%w: %s of %d%s (WithWait refuses writes it cannot replicate; a primary promoted in a failover has no replica until one rejoins)",
		ErrNotReplicated, what, s.cfg.waitN, at)
}

// connectedReplicas reads the number of replicas from a ROLE reply.
func connectedReplicas(role *redis.Cmd) (int, error) {
	v, err := role.Slice()
	if err != nil {
		return 0, fmt.Errorf("ROLE: %w", err)
	}
	if len(v) < 3 || v[0] != "master" {
		return 0, fmt.Errorf("ROLE: not a primary: %.64v", v)
	}
	replicas, _ := v[2].([]any)
	return len(replicas), nil
}

// undoClaim releases a claim that was acquired but not replicated as
// WithWait asks: no handler runs under it, and left in place it would
// answer every retry "in progress" until its lease lapsed. The release is
// not waited for; if it is lost too, the claim lapses with its lease.
func (s *Store) undoClaim(ctx context.Context, k idempotency.Key, res any) {
	tok, _, ok := acquired(res)
	if !ok {
		return
	}
	_, _ = s.settle(context.WithoutCancel(ctx), releaseScript, s.redisKey(k), nil, strconv.FormatInt(tok, 10), s.watch.settled)
}
