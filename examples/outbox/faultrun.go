package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// childEnv marks a child process of the fault run; a test binary standing
// in for the command looks at it too.
const childEnv = "SAFERETRY_OUTBOX_EXAMPLE_CHILD"

type runConfig struct {
	db       string
	payments int
	natsPort int
	natsBin  string
	verbose  bool
}

// faults counts what the fault run did.
type faults struct {
	dropped, relayKills, notifyKills, natsRestarts atomic.Int64
}

// faultRun runs the whole system under faults and reports whether every
// payment got exactly one e-mail. It refuses a run of fewer than one
// payment before it starts anything.
func faultRun(ctx context.Context, cfg runConfig, out io.Writer) (bool, error) {
	if cfg.payments < 1 {
		// Zero payments would pass vacuously, a negative count fail as if
		// an e-mail had gone missing.
		return false, fmt.Errorf("-payments %d: want at least 1", cfg.payments)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dbURL, dropSchema, err := ownSchema(ctx, cfg.db)
	if err != nil {
		return false, err
	}
	defer dropSchema()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	if err := setupDB(ctx, pool); err != nil {
		return false, err
	}

	nats, err := startNATS(cfg.natsBin, cfg.natsPort)
	if err != nil {
		return false, err
	}
	defer nats.stop()
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", cfg.natsPort)

	var f faults
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	payURL := make(chan string, 1)
	wg.Add(1)
	go func() { defer wg.Done(); supervise(ctx, []string{"-role", "payments", "-db", dbURL}, nil, payURL, nil) }()
	for i := range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			supervise(ctx, []string{"-role", "relay", "-db", dbURL, "-nats", natsURL}, crashes(2+i), nil, &f.relayKills)
		}()
		go func() {
			defer wg.Done()
			supervise(ctx, []string{"-role", "notify", "-db", dbURL, "-nats", natsURL}, crashes(2+i), nil, &f.notifyKills)
		}()
	}
	var base string
	select {
	case base = <-payURL:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(30 * time.Second):
		return false, errors.New("the payments service did not start")
	}

	// The clients; halfway through, the nats-server dies and comes back.
	start := time.Now()
	var done atomic.Int64
	work := make(chan int)
	var cwg sync.WaitGroup
	for range 8 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for i := range work {
				payOnce(ctx, base, i, &f)
				done.Add(1)
			}
		}()
	}
	for i := range cfg.payments {
		if i == cfg.payments/2 {
			if err := nats.restart(); err != nil {
				return false, err
			}
			f.natsRestarts.Add(1)
		}
		select {
		case work <- i:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	close(work)
	cwg.Wait()
	fmt.Fprintf(out, "outbox: %d payments made in %v\n", done.Load(), time.Since(start).Round(time.Millisecond))

	// Every payment's e-mail, then an AckWait more for a double to show.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var missing int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM example_payments p WHERE NOT EXISTS (SELECT FROM example_emails e WHERE e.payment_id = p.id)`).Scan(&missing); err != nil {
			return false, err
		}
		if missing == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond)
	cancel()
	return verdict(context.Background(), pool, cfg, &f, out)
}

// crashes returns the crash points of one supervised service: after how
// many batches or messages each of its first runs kills itself.
func crashes(n int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = 1 + rand.IntN(4)
	}
	return c
}

// payOnce makes one payment with one Idempotency-Key, retrying until an
// answer is kept; a third of the answers are dropped (read and thrown
// away, or cut off by a timeout while in flight) and the request sent
// again.
func payOnce(ctx context.Context, base string, i int, f *faults) {
	key := uuid.NewString()
	body := fmt.Sprintf(`{"amount": %d, "email": "user%d@example.com"}`, 100+i, i)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		drop := attempt < 3 && rand.IntN(3) == 0
		rctx, cancel := context.WithCancel(ctx)
		if drop && rand.IntN(2) == 0 {
			time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
		}
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, base+"/payments", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		status := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		cancel()
		if drop {
			f.dropped.Add(1)
			continue
		}
		if status == http.StatusCreated {
			return
		}
		time.Sleep(10 * time.Millisecond) // 409 in progress, 5xx, or a cut
	}
}

// verdict prints the e-mails per payment and the VERDICT line.
func verdict(ctx context.Context, pool *pgxpool.Pool, cfg runConfig, f *faults, out io.Writer) (bool, error) {
	rows, err := pool.Query(ctx, `SELECT p.id::text, p.email, count(e.payment_id) FROM example_payments p
LEFT JOIN example_emails e ON e.payment_id = p.id GROUP BY p.id, p.email ORDER BY p.email`)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	byCount := map[int64]int{}
	var bad []string
	total := 0
	for rows.Next() {
		var id, email string
		var n int64
		if err := rows.Scan(&id, &email, &n); err != nil {
			return false, err
		}
		total++
		byCount[n]++
		line := fmt.Sprintf("  payment %s (%s): %d e-mail(s)", id, email, n)
		if n != 1 {
			bad = append(bad, line)
		} else if cfg.verbose {
			fmt.Fprintln(out, line)
		}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, l := range bad {
		fmt.Fprintln(out, l)
	}
	fmt.Fprintf(out, "e-mails per payment: exactly one %d, none %d, more than one %d (of %d payments, %d operations)\n",
		byCount[1], byCount[0], total-byCount[1]-byCount[0], total, cfg.payments)
	fmt.Fprintf(out, "faults: dropped answers %d, relays killed between publish and mark %d, notification services killed after commit before ack %d, nats-server restarts %d\n",
		f.dropped.Load(), f.relayKills.Load(), f.notifyKills.Load(), f.natsRestarts.Load())
	ok := total == cfg.payments && byCount[1] == total
	word := "PASS"
	if !ok {
		word = "FAIL"
	}
	fmt.Fprintf(out, "VERDICT: %s: %d of %d payments have exactly one e-mail\n", word, byCount[1], cfg.payments)
	return ok, nil
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// supervise runs the service args as a child process until ctx is done,
// starting it again whenever it dies: until it has killed itself
// len(crash) times, the i-th time after crash[i] (-crash-after), then
// without crashing; each death by SIGKILL is counted in kills. Any other
// exit (the nats-server down at start) restarts it after a pause. A
// payments child's URL goes to urlc.
func supervise(ctx context.Context, args []string, crash []int, urlc chan<- string, kills *atomic.Int64) {
	for next := 0; ctx.Err() == nil; {
		a := args
		if next < len(crash) {
			a = append(append([]string(nil), args...), "-crash-after", strconv.Itoa(crash[next]))
		}
		cmd := exec.CommandContext(ctx, os.Args[0], a...)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		cmd.Stderr = os.Stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		stdout, err := cmd.StdoutPipe()
		if err != nil || cmd.Start() != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && urlc != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) && ctx.Err() == nil {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && kills != nil {
				kills.Add(1)
				next++
				continue
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// natsStartWait bounds the wait for the fault run's nats-server to accept
// connections.
const natsStartWait = 5 * time.Second

// natsServer is the fault run's own nats-server.
type natsServer struct {
	bin, dir string
	port     int
	wait     time.Duration // how long start waits for the server to accept connections
	cmd      *exec.Cmd     // the last process started
	exited   chan struct{} // closed once cmd has exited and been waited for
	exitErr  error         // what cmd's Wait returned, set before exited is closed
}

// startNATS starts a nats-server with JetStream on port, its store in a
// temporary directory. When the server does not come up, nothing of it is
// left: neither a process nor the directory.
func startNATS(bin string, port int) (*natsServer, error) {
	return launchNATS(bin, port, natsStartWait)
}

// launchNATS is startNATS waiting up to wait for the server to accept
// connections.
func launchNATS(bin string, port int, wait time.Duration) (*natsServer, error) {
	dir, err := os.MkdirTemp("", "outbox-example-nats-")
	if err != nil {
		return nil, err
	}
	s := &natsServer{bin: bin, dir: dir, port: port, wait: wait}
	if err := s.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// start starts the process and waits until it accepts connections. A
// process that exits first fails it at once; one that does not listen
// within s.wait is killed.
func (s *natsServer) start() error {
	// Refuse a port that something already listens on: the run would talk
	// to that server, and kill and restart only its own.
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
		c.Close()
		return fmt.Errorf("port %d is in use: the fault run needs a nats-server of its own (-nats-port)", s.port)
	}
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start nats-server: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		s.exitErr = cmd.Wait()
		close(exited)
	}(s.exited)

	deadline := time.NewTimer(s.wait)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("nats-server on port %d exited before it listened: %v", s.port, s.exitErr)
		case <-deadline.C:
			s.kill()
			return fmt.Errorf("nats-server on port %d did not come up within %v", s.port, s.wait)
		case <-poll.C:
		}
	}
}

// kill kills the last process started, if it still runs, and waits for it.
func (s *natsServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// restart kills the server with SIGKILL and starts it again on its store.
func (s *natsServer) restart() error {
	s.kill()
	time.Sleep(300 * time.Millisecond)
	return s.start()
}

func (s *natsServer) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

// ownSchema creates a schema of the run's own and returns dbURL with it as
// the search_path, and a function dropping it.
func ownSchema(ctx context.Context, dbURL string) (string, func(), error) {
	var b [6]byte
	_, _ = crand.Read(b[:])
	name := "example_outbox_" + hex.EncodeToString(b[:])
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return "", nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA "`+name+`"`); err != nil {
		pool.Close()
		return "", nil, fmt.Errorf("-db: %w", err)
	}
	drop := func() {
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`)
		pool.Close()
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}
