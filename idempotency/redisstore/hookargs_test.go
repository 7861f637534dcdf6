package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
)

// TestHooksSeeScriptArgumentsAsText checks what a go-redis hook sees of
// every script command: the key at its place in cmd.Args() as the
// entry's name, a string (what a hook that reads the key, such as a
// per-key metric, takes it for), the token of Renew, Complete and Release formatted as its
// decimal, and cmd.String(), which tracing hooks record as the statement
// (redisotel's db.statement), holding the name and no pointer's address.
func TestHooksSeeScriptArgumentsAsText(t *testing.T) {
	s, rdb, prefix := newStore(t)
	warmScripts(t, s)
	rec := &commandNames{}
	rdb.AddHook(rec)
	ctx := context.Background()
	k := idempotency.Key{Scope: "hooks", Key: "k-1"}
	name := prefix + "{}" + strconv.Itoa(len(k.Scope)) + ":" + k.Scope + ":" + k.Key
	check := func(op string, token int64) {
		t.Helper()
		var cmds []redis.Cmder
		for _, cmd := range rec.commands() {
			if n := cmd.Name(); n == "evalsha" || n == "eval" {
				cmds = append(cmds, cmd)
			}
		}
		rec.reset()
		if len(cmds) == 0 {
			t.Fatalf("%s: no script command seen", op)
		}
		for _, cmd := range cmds {
			args := cmd.Args()
			if len(args) < 4 {
				t.Fatalf("%s: %d arguments", op, len(args))
			}
			if key, ok := args[3].(string); !ok || key != name {
				t.Errorf("%s: cmd.Args()[3] is %T %v, want the string %q", op, args[3], args[3], name)
			}
			if token != 0 && fmt.Sprint(args[4]) != strconv.FormatInt(token, 10) {
				t.Errorf("%s: cmd.Args()[4] formats as %q, want the token %d", op, fmt.Sprint(args[4]), token)
			}
			str := cmd.String()
			_, after, found := strings.Cut(str, " 1 "+name)
			if !found || (after != "" && after[0] != ' ' && after[0] != ':') || strings.Contains(str, " 0x") {
				t.Errorf("%s: cmd.String() = %.120q, want the name %q after numkeys", op, str, name)
			}
		}
	}
	res, err := s.Claim(ctx, k, "fingerprint-1", time.Minute, time.Hour)
	if err != nil || !res.Acquired {
		t.Fatalf("Claim: %+v, %v", res, err)
	}
	check("Claim", 0)
	if err := s.Renew(ctx, k, res.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("Renew", res.Token)
	if err := s.Complete(ctx, k, res.Token, idempotency.Response{Status: 201, Body: []byte("done")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	check("Complete", res.Token)
	if _, _, err := s.Get(ctx, k); err != nil {
		t.Fatal(err)
	}
	check("Get", 0)

	k.Key = "k-2"
	name = prefix + "{}" + strconv.Itoa(len(k.Scope)) + ":" + k.Scope + ":" + k.Key
	if res, err = s.Claim(ctx, k, "fingerprint-2", time.Minute, time.Hour); err != nil || !res.Acquired {
		t.Fatalf("Claim: %+v, %v", res, err)
	}
	check("Claim", 0)
	if err := s.Release(ctx, k, res.Token); err != nil {
		t.Fatal(err)
	}
	check("Release", res.Token)
}
