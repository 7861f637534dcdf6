package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// run is one Checker.Run against one target.
type run struct {
	c       *Checker
	t       Target
	profile Profile
	sd      *sender
	plan    plan
	results map[string]Result
}

// Run runs every check against t and returns the report. Its error, an
// *Error, is ErrInvalid for a Checker or Target that cannot run and
// ErrUnreachable when the first request (or the first read of CountURL)
// got no answer; a report is returned only without error. When ctx ends
// first, Run returns early with an *Error whose cause is ErrInterrupted
// and which also matches ctx's error.
func (c *Checker) Run(ctx context.Context, t Target) (Report, error) {
	if err := c.validate(t); err != nil {
		return Report{}, err
	}
	client := c.client()
	if c.Client == nil {
		defer client.CloseIdleConnections() // the client is this run's own
	}
	r := &run{
		c: c, t: t, profile: c.profile(),
		sd:      &sender{client: client, header: t.Header, timeout: c.timeout()},
		plan:    c.newPlan(t),
		results: make(map[string]Result),
	}
	start := time.Now()
	if err := r.all(ctx); err != nil {
		var ce *Error
		if !errors.As(err, &ce) { // the context ended
			err = &Error{Target: t.name(), Cause: ErrInterrupted, Err: err}
		}
		return Report{}, err
	}
	rep := Report{Target: t.name(), Method: t.method(), URL: t.URL, Profile: r.profile, Started: start, Elapsed: Duration(time.Since(start))}
	for _, ch := range checks {
		res, ok := r.results[ch.id]
		if !ok {
			res = Result{Status: Skip, Verdict: "not run"}
		}
		res.ID, res.Title, res.Level = ch.id, ch.title, ch.level(r.profile)
		if res.Level == LevelInfo && res.Status == Fail {
			res.Status = Warn
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// set records the result of check id.
func (r *run) set(id string, st Status, verdict string, evidence ...Exchange) {
	r.results[id] = Result{Status: st, Verdict: verdict, Evidence: evidence}
}

func (r *run) skip(reason string, ids ...string) {
	for _, id := range ids {
		r.set(id, Skip, reason)
	}
}

// counts are CountURL's readings around the operations.
type counts struct {
	on       bool
	bySize   bool // the readings are the answer's size in bytes, not a count of records
	readings []int64
	evidence []Exchange
	err      error // the first failed reading
}

func (r *run) read(ctx context.Context, cs *counts) int64 {
	if !cs.on || cs.err != nil {
		return 0
	}
	n, bySize, ex, err := r.count(ctx)
	cs.evidence = append(cs.evidence, ex)
	if err != nil {
		cs.err = err
	}
	cs.bySize = cs.bySize || bySize
	cs.readings = append(cs.readings, n)
	return n
}

// all runs the checks in order, recording their results.
func (r *run) all(ctx context.Context) error {
	p := r.plan
	cs := &counts{on: r.c.CountURL != ""}
	n0 := r.read(ctx, cs)
	if cs.err != nil {
		if err := ctx.Err(); err != nil {
			// The read failed because the run was interrupted, as the
			// first request's would: the target is not to blame.
			return err
		}
		cause := ErrInvalid // it answered, but not with a count
		if len(cs.evidence) == 0 || !cs.evidence[0].answered() {
			cause = ErrUnreachable
		}
		return &Error{Target: r.t.name(), Cause: cause, Err: fmt.Errorf("count url: %w", cs.err)}
	}

	first := r.sd.send(ctx, p.first)
	if !first.answered() {
		if err := ctx.Err(); err != nil {
			return err
		}
		return &Error{Target: r.t.name(), Cause: ErrUnreachable, Err: errors.New(first.Error)}
	}
	ok := first.success()
	if ok {
		r.set(CheckFirstRequest, Pass, fmt.Sprintf("%d, %d bytes", first.Status, len(first.body)), first)
	} else {
		r.set(CheckFirstRequest, Fail, fmt.Sprintf("answered %s, want 2xx: check the body, headers and URL", first.outcome()), first)
		r.skip("the first request did not succeed", CheckReplay, CheckReplayHeaders, CheckReplayMarker, CheckReuseRefused, CheckReuseStatus,
			CheckConcurrentOnce, CheckConcurrent409, CheckConflictRetryAfter, CheckCountOnce, CheckScopeIsolation, CheckTTLExpiry)
	}
	n1 := r.read(ctx, cs)

	var errorAnswers []Exchange // the answers problem-json looks at
	var reuse Exchange
	if ok {
		replay := r.sd.send(ctx, p.replay)
		r.checkReplay(first, replay)
		reuse = r.sd.send(ctx, p.reuse)
	}
	var sameLength *Exchange
	if ok && reuse.clientError() && p.sameLength.body != nil {
		// Before the count: against a server that keeps the contract it
		// is refused, and one that runs it adds a record.
		ex := r.sd.send(ctx, p.sameLength)
		sameLength = &ex
	}
	n2 := r.read(ctx, cs)
	if ok {
		// Sent after the count, which it would add to: against a server
		// that keeps the contract, it runs.
		var alone Exchange
		if reuse.clientError() {
			alone = r.sd.send(ctx, p.otherAlone)
		}
		r.checkReuse(first, reuse, alone, sameLength)
		r.checkOtherPath(first, r.sd.send(ctx, p.otherPath))
		if reuse.clientError() {
			errorAnswers = append(errorAnswers, reuse)
		}
	}

	errorAnswers = append(errorAnswers, r.checkKeys(ctx)...)

	var conflicts, burst, follow []Exchange
	n3 := r.read(ctx, cs)
	if ok {
		burst, follow = r.sendBurst(ctx)
	}
	n4 := r.read(ctx, cs)
	if ok {
		// A count that grew during the burst by what the first request
		// added shows that the burst's key ran, which one folded into
		// the first request's key does not.
		ranByCount := cs.on && cs.err == nil && n1 > n0 && n4-n3 == n1-n0
		conflicts = r.checkBurst(first, burst, follow, ranByCount)
		errorAnswers = append(errorAnswers, conflicts...)
		r.checkCounts(cs, n0, n1, n2, n3, n4)
	}
	r.checkProblems(errorAnswers)

	if ok {
		r.checkScope(ctx)
		if err := r.checkTTL(ctx, first, cs); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (r *run) checkReplay(first, replay Exchange) {
	switch {
	case !replay.answered():
		r.set(CheckReplay, Fail, "no answer: "+replay.Error, first, replay)
	case replay.Status != first.Status:
		r.set(CheckReplay, Fail, fmt.Sprintf("answered %d, the first request %d", replay.Status, first.Status)+goneNote(replay), first, replay)
	case !bytes.Equal(replay.body, first.body):
		r.set(CheckReplay, Fail, "the body differs from the first answer's "+firstDifference(first.body, replay.body), first, replay)
	default:
		r.set(CheckReplay, Pass, fmt.Sprintf("%d and the same %d bytes", replay.Status, len(replay.body)), first, replay)
	}
	if !replay.answered() {
		r.skip("the replay got no answer", CheckReplayHeaders, CheckReplayMarker)
		return
	}
	r.checkReplayHeaders(first, replay)
	switch {
	case first.replayed():
		// A fresh key's answer marked as a replay: the server marks
		// every answer, so the marker tells no replay, and a marked
		// success of the burst may be one more execution.
		r.set(CheckReplayMarker, Fail, "the first answer, to a fresh key, is marked "+contract.HeaderReplayed+": true too: the marker does not tell a replay from an execution", first, replay)
	case replay.replayed():
		r.set(CheckReplayMarker, Pass, contract.HeaderReplayed+": true", replay)
	default:
		r.set(CheckReplayMarker, Fail, "the second answer carries no "+contract.HeaderReplayed+": true", replay)
	}
}

// goneNote explains a 410 among exs, answers where the operation's replay
// could come, for a verdict: a server that keeps the contract answers 410
// for a key whose operation completed but whose answer it did not keep
// (CONTRACT.md: completed but not replayable), which points the user at
// the server's limits on stored answers rather than at its keys. "" when
// none of exs is a 410.
func goneNote(exs ...Exchange) string {
	for _, ex := range exs {
		if ex.answered() && ex.Status == http.StatusGone {
			return " (410 Gone: the server recorded the first answer as not replayable, the operation completed but its answer was not kept: " +
				"usually an answer too large for its store, or a body the server refuses to keep, such as one not sent whole (shorter than its Content-Length); look at its limits on stored answers)"
		}
	}
	return ""
}

// checkReplayHeaders runs replay-headers: the replay carries the first
// answer's values of the headers every replay carries
// (contract.ReplayHeaders), none when it had none: the same field value,
// its lines joined or not. Values that mean the same but are written
// differently (see sameField) get a warning: a client that compares bytes
// sees a change.
func (r *run) checkReplayHeaders(first, replay Exchange) {
	var same, diffs, spelt []string
	for _, name := range contract.ReplayHeaders() {
		a, b := first.header.Values(name), replay.header.Values(name)
		switch {
		case strings.Join(a, ", ") == strings.Join(b, ", "):
			// The same field value (RFC 9110, section 5.3), its lines
			// perhaps joined as a store that keeps headers in a map does.
			if len(a) > 0 {
				same = append(same, name)
			}
		case sameField(name, a, b):
			spelt = append(spelt, fmt.Sprintf("%s %s, then %s", name, headerValues(a), headerValues(b)))
		default:
			diffs = append(diffs, fmt.Sprintf("%s %s, then %s", name, headerValues(a), headerValues(b)))
		}
	}
	switch {
	case len(diffs) > 0:
		r.set(CheckReplayHeaders, Fail, "the replay's headers differ from the first answer's: "+strings.Join(diffs, "; ")+goneNote(replay), first, replay)
	case len(spelt) > 0:
		r.set(CheckReplayHeaders, Warn, "the replay's headers mean what the first answer's do, written differently: "+strings.Join(spelt, "; "), first, replay)
	case len(same) == 0:
		r.set(CheckReplayHeaders, Pass, "neither answer has "+strings.Join(contract.ReplayHeaders(), ", "), first, replay)
	default:
		r.set(CheckReplayHeaders, Pass, "the same "+strings.Join(same, ", "), first, replay)
	}
}

// sameField reports whether two answers' lines of the header name hold the
// same field value: lines joined by commas (RFC 9110, section 5.3), the
// whitespace around each comma aside; Content-Type compared as a media type
// (type, subtype, parameter names and the charset's value in any case).
func sameField(name string, a, b []string) bool {
	if name == "Content-Type" && len(a) == 1 && len(b) == 1 {
		ta, pa, errA := mime.ParseMediaType(a[0])
		tb, pb, errB := mime.ParseMediaType(b[0])
		if errA == nil && errB == nil {
			for _, p := range []map[string]string{pa, pb} {
				if cs, ok := p["charset"]; ok {
					p["charset"] = strings.ToLower(cs)
				}
			}
			return ta == tb && maps.Equal(pa, pb)
		}
	}
	return len(a) > 0 && len(b) > 0 && fieldValue(a) == fieldValue(b)
}

// fieldValue joins a header's lines into its field value, without the
// whitespace around the commas that separate its elements (not those in a
// quoted string, which are part of a value).
func fieldValue(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		quoted, escaped, start := false, false, 0
		for j := 0; j < len(l); j++ {
			switch c := l[j]; {
			case escaped:
				escaped = false
			case quoted && c == '\\':
				escaped = true
			case c == '"':
				quoted = !quoted
			case c == ',' && !quoted:
				b.WriteString(strings.TrimSpace(l[start:j]))
				b.WriteByte(',')
				start = j + 1
			}
		}
		b.WriteString(strings.TrimSpace(l[start:]))
	}
	return b.String()
}

// headerValues shows a header's values in a verdict.
func headerValues(vs []string) string {
	if len(vs) == 0 {
		return "absent"
	}
	return strconv.Quote(strings.Join(vs, ", "))
}

// firstDifference says where two bodies first differ.
func firstDifference(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("at byte %d (%d bytes, then %d)", i, len(a), len(b))
}

// checkReuse runs reuse-refused and reuse-status on the answer to the
// first request's key with the other body (reuse) and, when that was
// refused, to the other body with a key of its own (alone): a refusal
// the other body gets whatever its key says nothing about the key. When
// reuse was refused, sameLength is the answer to the first key with a
// body as long as the first (nil when none could be derived): a server
// that binds a key to its body's length alone refuses the other body only
// for its length, and replays or runs this one. Its refusal, a key bound
// to its body or a derived body the server finds invalid, is as good as
// any; reuse-status reads the other body's answer alone.
func (r *run) checkReuse(first, reuse, alone Exchange, sameLength *Exchange) {
	if sameLength != nil && !sameLength.clientError() {
		ev := []Exchange{first, reuse, *sameLength}
		what := fmt.Sprintf("refused the other body with %d, but the same key with a body of the same length as the first (%d bytes, one of them changed)", reuse.Status, len(r.plan.sameLength.body))
		switch sl := *sameLength; {
		case !sl.answered():
			r.set(CheckReuseRefused, Fail, what+" got no answer: "+sl.Error, ev...)
		case sl.success() && sameResource(first, sl):
			r.set(CheckReuseRefused, Fail, fmt.Sprintf("%s answered %d with the first request's answer: the key is not bound to its body's bytes (to its length alone, say)", what, sl.Status), ev...)
		case sl.success():
			r.set(CheckReuseRefused, Fail, fmt.Sprintf("%s answered %d with another resource: a used key ran another request", what, sl.Status), ev...)
		default:
			r.set(CheckReuseRefused, Fail, fmt.Sprintf("%s answered %d, want a 4xx refusal", what, sl.Status), ev...)
		}
		if alone.answered() && alone.Status == reuse.Status {
			r.set(CheckReuseStatus, Skip, "the other body is refused whatever its key: give a valid other body (Target.OtherBody, -other-body)")
		} else {
			r.checkReuseStatus(reuse)
		}
		return
	}
	sameNote, sameEv := "", []Exchange(nil)
	if sameLength != nil {
		sameNote = fmt.Sprintf("; the key with a body as long as the first, %d", sameLength.Status)
		sameEv = []Exchange{*sameLength}
	}
	switch {
	case !reuse.answered():
		r.set(CheckReuseRefused, Fail, "no answer: "+reuse.Error, reuse)
	case reuse.success() && sameResource(first, reuse):
		r.set(CheckReuseRefused, Fail, fmt.Sprintf("answered %d with the first request's answer: the key is not bound to its body", reuse.Status), first, reuse)
	case reuse.success():
		r.set(CheckReuseRefused, Fail, fmt.Sprintf("answered %d with another resource: a used key ran another request", reuse.Status), first, reuse)
	case reuse.clientError() && alone.answered() && alone.Status == reuse.Status:
		r.set(CheckReuseRefused, Warn, fmt.Sprintf("refused with %d, but the other body gets %d with a fresh key too: it is invalid on its own, so the refusal says nothing about the key; give a valid other body (Target.OtherBody, -other-body)%s", reuse.Status, alone.Status, sameNote), append([]Exchange{reuse, alone}, sameEv...)...)
		r.set(CheckReuseStatus, Skip, "the other body is refused whatever its key: give a valid other body (Target.OtherBody, -other-body)")
		return
	case reuse.clientError():
		r.set(CheckReuseRefused, Pass, fmt.Sprintf("refused with %d; the other body alone, with a fresh key, answered %s%s", reuse.Status, alone.outcome(), sameNote), append([]Exchange{reuse, alone}, sameEv...)...)
	default:
		r.set(CheckReuseRefused, Fail, fmt.Sprintf("answered %d, want a 4xx refusal", reuse.Status), reuse)
	}
	r.checkReuseStatus(reuse)
}

// checkOtherPath fails reuse-refused when the first request's key and
// body at another path (otherPath, an endpoint no server has) got the
// first request's answer: marked as a replay, or its status and bytes when
// they name its resource. A key binds its method and path too
// (CONTRACT.md: they are in the fingerprint); a layer that leaves them out
// answers one key's second endpoint with the first's answer, and that
// request never runs. Any other answer (404, 405, a 422 for the key)
// leaves reuse-refused's status as it is, and joins its verdict and
// evidence.
func (r *run) checkOtherPath(first, otherPath Exchange) {
	res := r.results[CheckReuseRefused]
	if res.Status == Fail {
		return
	}
	firsts := firstsAnswer(first, otherPath) && first.identified()
	if !otherPath.replayed() && !firsts {
		res.Verdict += "; the key and body at another path, " + otherPath.outcome()
		res.Evidence = append(res.Evidence, otherPath)
		r.results[CheckReuseRefused] = res
		return
	}
	what := "the first request's answer"
	if otherPath.replayed() {
		what = "a replay (" + contract.HeaderReplayed + ": true)"
	}
	r.set(CheckReuseRefused, Fail, fmt.Sprintf("the same key and body at another path (%s), an endpoint of its own, answered %d with %s: the key is not bound to its endpoint, so one key used for two endpoints runs the second not at all", otherPath.URL, otherPath.Status, what), first, otherPath)
}

// checkReuseStatus runs reuse-status on the answer to the first request's
// key with the other body.
func (r *run) checkReuseStatus(reuse Exchange) {
	want := []int{http.StatusUnprocessableEntity}
	if r.profile == ProfileStripe {
		want = []int{http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity}
	}
	if !reuse.answered() {
		r.set(CheckReuseStatus, Skip, "the request got no answer")
		return
	}
	for _, w := range want {
		if reuse.Status == w {
			r.set(CheckReuseStatus, Pass, strconv.Itoa(w), reuse)
			return
		}
	}
	r.set(CheckReuseStatus, Fail, fmt.Sprintf("answered %d, want %s", reuse.Status, joinInts(want, " or "))+goneNote(reuse), reuse)
}

func joinInts(ns []int, sep string) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}

// checkKeys runs missing-key, malformed-key and long-key, and returns
// their 4xx answers for problem-json.
func (r *run) checkKeys(ctx context.Context) []Exchange {
	var errs []Exchange
	// one sends s, whose key is what, and says why its answer fails the
	// check ("" when it is the 400 wanted).
	one := func(s spec, what string) (Exchange, string) {
		ex := r.sd.send(ctx, s)
		if ex.clientError() {
			errs = append(errs, ex)
		}
		switch {
		case !ex.answered():
			return ex, "no answer: " + ex.Error
		case ex.Status == http.StatusBadRequest:
			return ex, ""
		case ex.success():
			return ex, fmt.Sprintf("answered %d: ran a request with %s", ex.Status, what)
		}
		return ex, fmt.Sprintf("answered %d to %s, want 400", ex.Status, what)
	}
	single := func(id string, s spec, what string) {
		if ex, why := one(s, what); why != "" {
			r.set(id, Fail, why, ex)
		} else {
			r.set(id, Pass, "400", ex)
		}
	}
	if r.t.KeyRequired {
		single(CheckMissingKey, r.plan.missing, "no key")
	} else {
		r.skip("the endpoint is not said to require a key (-key-required)", CheckMissingKey)
	}
	var sent, failed []Exchange
	var whys []string
	for _, m := range r.plan.malformed {
		ex, why := one(m.spec, "a malformed key ("+m.what+")")
		sent = append(sent, ex)
		if why != "" {
			failed, whys = append(failed, ex), append(whys, why)
		}
	}
	if len(failed) > 0 {
		r.set(CheckMalformedKey, Fail, strings.Join(whys, "; "), failed...)
	} else {
		r.set(CheckMalformedKey, Pass, "400", sent...)
	}
	single(CheckLongKey, r.plan.long, "a key over 255 bytes")
	return errs
}

// Follow-ups after the burst: how often a 409 is asked again, and how
// long a Retry-After is waited at most.
const (
	maxFollowUps   = 10
	maxFollowWait  = time.Second
	defaultFollowW = 100 * time.Millisecond
)

// sendBurst sends the burst, Concurrency requests with its key at once,
// and then asks again while the answer is 409, so that the operation's one
// success is seen even if every request of the burst met it in progress.
// It returns the burst's answers and the follow-ups'.
func (r *run) sendBurst(ctx context.Context) (answers, follow []Exchange) {
	n := r.c.concurrency()
	answers = make([]Exchange, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			answers[i] = r.sd.send(ctx, r.plan.burst)
		}()
	}
	close(gate)
	wg.Wait()
	for range maxFollowUps {
		ex := r.sd.send(ctx, r.plan.burst)
		follow = append(follow, ex)
		if !ex.answered() || ex.Status != http.StatusConflict {
			break
		}
		if !wait(ctx, followWait(ex)) {
			break
		}
	}
	return answers, follow
}

// checkBurst runs concurrent-once, concurrent-409 and conflict-retry-after
// on the burst's answers and follow-ups, and returns the 409 answers it
// got. first is the first request's answer, whose key the burst's is in
// upper case; ranByCount says that CountURL grew during the burst by what
// the first request added.
func (r *run) checkBurst(first Exchange, answers, follow []Exchange, ranByCount bool) []Exchange {
	n := len(answers)
	all := append(append([]Exchange(nil), answers...), follow...)

	var succ, conflicts, others []Exchange
	for _, ex := range all {
		switch {
		case ex.success():
			succ = append(succ, ex)
		case ex.answered() && ex.Status == http.StatusConflict:
			conflicts = append(conflicts, ex)
		default:
			others = append(others, ex)
		}
	}
	reps := resources(succ)
	// A server that marks its replays (replay-marker passed) marks every
	// success of the burst but the one execution's: two unmarked ones are
	// two executions, whatever their bodies say.
	marks := r.results[CheckReplayMarker].Status == Pass
	var unmarked []Exchange
	identified := false
	for _, s := range succ {
		if !s.replayed() {
			unmarked = append(unmarked, s)
		}
		identified = identified || s.identified()
	}
	// The burst's key differs from the first request's only in case: a
	// server that compares keys in any case (a key column under a
	// case-insensitive collation) answers every request of the burst
	// with the first request's answer, and runs nothing.
	// A 409 in progress shows the burst's key running, which a key folded
	// into the first request's, completed before the burst, never is; so
	// does a count that grew by one operation during the burst. Without
	// either, a server that marks no replay and answers every run with
	// the same bytes looks the same whether its keys fold or not.
	allFirsts, allAnswered, inProgress := len(succ) > 0, true, false
	for _, s := range succ {
		allFirsts = allFirsts && firstsAnswer(first, s)
	}
	for _, ex := range all {
		allAnswered = allAnswered && ex.answered()
	}
	for _, ex := range conflicts {
		inProgress = inProgress || !ex.replayed()
	}
	countNote := "give a count (-count-url) to tell"
	if r.c.CountURL != "" {
		countNote = "the count does not show a run of the burst either (see count-once)"
	}
	const folded = "the burst's key is the first request's in upper case, another key"
	switch {
	case len(reps) == 0:
		r.set(CheckConcurrentOnce, Fail, fmt.Sprintf("no request with the key succeeded, during the burst of %d or after it: %s", n, tally(all))+goneNote(all...), all...)
	case marks && allFirsts && allAnswered && len(unmarked) == 0:
		// Every request was answered, and none of the successes is an
		// execution: the key had run before the burst.
		r.set(CheckConcurrentOnce, Fail, fmt.Sprintf("%d at once, %d after: %s, yet every one of its %d successes is marked %s: true and is the first request's answer, and none is an execution: the server compares keys in any case (a case-insensitive key column, say), so an operation whose key differs from another's only in case never runs (%s)", n, len(follow), folded, len(succ), contract.HeaderReplayed, tally(all)), append([]Exchange{first}, all...)...)
	case !marks && allFirsts && identified && !inProgress && !ranByCount:
		r.set(CheckConcurrentOnce, Warn, fmt.Sprintf("%d at once, %d after: %s, yet its %d successes are all the first request's answer (%s), replays are not marked, and none met the key in progress (409): either the server compares keys in any case and ran nothing, or each run names the same resource; %s (%s)", n, len(follow), folded, len(succ), describeResource(first), countNote, tally(all)), append([]Exchange{first}, all...)...)
	case len(reps) > 1:
		var names []string
		for i, rep := range reps {
			if i == maxNamed {
				names = append(names, "...")
				break
			}
			names = append(names, describeResource(rep))
		}
		r.set(CheckConcurrentOnce, Fail, fmt.Sprintf("%d successes name %d different resources (%s): one key ran %d times", len(succ), len(reps), strings.Join(names, "; "), len(reps)), all...)
	case identified:
		r.set(CheckConcurrentOnce, Pass, fmt.Sprintf("%d at once, %d after: one resource in %d successes (%s)", n, len(follow), len(succ), tally(all)), all...)
	case marks && len(unmarked) > 1:
		// Unmarked answers may also be the one execution's answer handed
		// to requests that waited for it: only a count tells for sure.
		r.set(CheckConcurrentOnce, Warn, fmt.Sprintf("%d at once, %d after: %d of %d successes are not marked %s: true, though the server marks its replays, and they name no resource: maybe %d executions, maybe one answer shared with waiting requests; give a count (-count-url) to tell (%s)", n, len(follow), len(unmarked), len(succ), contract.HeaderReplayed, len(unmarked), tally(all)), all...)
	case marks:
		r.set(CheckConcurrentOnce, Pass, fmt.Sprintf("%d at once, %d after: %d of %d successes unmarked, the others marked as replays (%s)", n, len(follow), len(unmarked), len(succ), tally(all)), all...)
	default:
		r.set(CheckConcurrentOnce, Warn, fmt.Sprintf("%d at once, %d after: %d successes, but they name no resource (no Location, no id) and replays are not marked: cannot tell one execution from several (%s)", n, len(follow), len(succ), tally(all)), all...)
	}
	// Held to the operation's answer only when replays are byte-true:
	// otherwise replay has failed, and a replay's own bytes would pass
	// for another answer here.
	var notAnswer []Exchange
	if r.results[CheckReplay].Status == Pass {
		notAnswer = notTheAnswer(succ)
	}
	// A 409 marked as a replay is the operation's own answer, final for a
	// client (CONTRACT.md, client rule 3), not one in progress: a client
	// told so stops retrying and never learns the operation's outcome.
	var marked []Exchange
	for _, ex := range conflicts {
		if ex.replayed() {
			marked = append(marked, ex)
		}
	}
	var why []string
	if len(others) > 0 {
		why = append(why, tally(others))
	}
	if len(notAnswer) > 0 {
		answer := succ[len(succ)-1]
		why = append(why, fmt.Sprintf("%d successes that are not the operation's answer (%d, %d bytes): %s", len(notAnswer), answer.Status, len(answer.body), tally(notAnswer)))
	}
	if len(marked) > 0 {
		why = append(why, fmt.Sprintf("%d 409 answers marked %s: true, which a client takes for the operation's final answer, not one in progress", len(marked), contract.HeaderReplayed))
	}
	if len(why) == 0 {
		r.set(CheckConcurrent409, Pass, fmt.Sprintf("%d answered 409, the rest the success", len(conflicts)), all...)
	} else {
		r.set(CheckConcurrent409, Fail, fmt.Sprintf("%d of %d answers neither the operation's answer nor 409 in progress: %s", len(others)+len(notAnswer)+len(marked), len(all), strings.Join(why, "; "))+goneNote(others...), all...)
	}
	if len(conflicts) == 0 {
		reason := "no 409 came: the first request finished before the others arrived"
		if len(notAnswer) > 0 {
			reason = "no 409 came: the requests that met the first in progress got a success instead (see concurrent-409)"
		}
		r.set(CheckConflictRetryAfter, Skip, reason)
		return nil
	}
	var bad []Exchange
	for _, ex := range conflicts {
		if _, _, ok := retrypolicy.RetryAfter(&http.Response{StatusCode: ex.Status, Header: ex.header}, time.Now(), time.Hour, nil); !ok {
			bad = append(bad, ex)
		}
	}
	if len(bad) > 0 {
		r.set(CheckConflictRetryAfter, Fail, fmt.Sprintf("%d of %d 409 answers have no valid Retry-After", len(bad), len(conflicts)), bad...)
	} else {
		r.set(CheckConflictRetryAfter, Pass, fmt.Sprintf("all %d 409 answers, Retry-After %s", len(conflicts), conflicts[0].header.Get("Retry-After")), conflicts...)
	}
	return conflicts
}

// notTheAnswer returns the successes of a burst that are not the
// operation's answer and name no other resource: answers to requests that
// met the key in progress, which get 409 or that answer (a replay, or the
// live answer handed to waiting requests: the same status and bytes). The
// operation's answer is the last success, which is the answer asked for
// once the burst settled when there is one. A success that names another
// resource is another execution, which concurrent-once reports.
func notTheAnswer(succ []Exchange) []Exchange {
	if len(succ) == 0 {
		return nil
	}
	answer := succ[len(succ)-1]
	var out []Exchange
	for _, s := range succ {
		same := s.Status == answer.Status && bytes.Equal(s.body, answer.body)
		if same || (s.identified() && !sameResource(s, answer)) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// maxNamed is how many resources a verdict names.
const maxNamed = 3

// followWait is how long to wait before asking again after the 409 ex.
func followWait(ex Exchange) time.Duration {
	if _, asked, ok := retrypolicy.RetryAfter(&http.Response{StatusCode: ex.Status, Header: ex.header}, time.Now(), time.Hour, nil); ok {
		return min(asked, maxFollowWait)
	}
	return defaultFollowW
}

// wait waits d, or until ctx ends; it reports whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, clock.Real, d) == nil
}

// tally counts answers by status: "15×201, 5×409".
func tally(exs []Exchange) string {
	byStatus := map[string]int{}
	for _, ex := range exs {
		k := "no answer"
		if ex.answered() {
			k = strconv.Itoa(ex.Status)
		}
		byStatus[k]++
	}
	keys := make([]string, 0, len(byStatus))
	for k := range byStatus {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d×%s", byStatus[k], k)
	}
	return strings.Join(parts, ", ")
}

// checkCounts runs count-once on the readings before the first request
// (n0), after it (n1), after the replay and the reuse (n2), before the
// burst (n3) and after it (n4). Readings by size never fail it: a body
// may grow by more bytes than the first record took (one more digit in an
// id) without a record more, so only an exact match passes and anything
// else warns.
func (r *run) checkCounts(cs *counts, n0, n1, n2, n3, n4 int64) {
	if !cs.on {
		r.skip("no -count-url", CheckCountOnce)
		return
	}
	if cs.err != nil {
		r.set(CheckCountOnce, Fail, cs.err.Error(), cs.evidence...)
		return
	}
	unit := n1 - n0
	story := fmt.Sprintf("%d before, %d after the first request, %d after its replay and reuse, %d before the burst of %d and %d after it",
		n0, n1, n2, n3, r.c.concurrency(), n4)
	st, verdict := Pass, story
	switch {
	case n2 != n1:
		st, verdict = Fail, story+": the replay or the reuse added records"
	case unit <= 0:
		st, verdict = Warn, story+": the first request added no record here, so the count cannot show one execution"
	case n4-n3 > unit:
		st, verdict = Fail, fmt.Sprintf("%s: the burst added %d records, one operation adds %d", story, n4-n3, unit)
	case n4-n3 < unit:
		st, verdict = Warn, fmt.Sprintf("%s: the burst added %d records, one operation adds %d", story, n4-n3, unit)
	}
	if cs.bySize {
		verdict = strings.ReplaceAll(verdict, "records", "bytes") + " (counted by bytes"
		if st == Pass {
			verdict += ": each operation added as many)"
		} else {
			st, verdict = Warn, verdict+", which cannot tell records apart: give #/pointer to a count)"
		}
	}
	r.set(CheckCountOnce, st, verdict, cs.evidence...)
}

// checkProblems runs problem-json over the error answers seen.
func (r *run) checkProblems(errs []Exchange) {
	if len(errs) == 0 {
		r.skip("no error answer to look at", CheckProblemJSON)
		return
	}
	var bad []Exchange
	var why []string
	for _, ex := range errs {
		var doc map[string]any
		// null decodes into a nil map without error, but a problem
		// document is a JSON object (RFC 9457, section 3).
		if !contract.DecodeProblem(ex.header, ex.body, &doc) || doc == nil {
			bad = append(bad, ex)
			why = append(why, fmt.Sprintf("%d %s", ex.Status, orNone(ex.header.Get("Content-Type"))))
			continue
		}
		if st, ok := doc["status"].(float64); ok && int(st) != ex.Status {
			bad = append(bad, ex)
			why = append(why, fmt.Sprintf("%d with \"status\": %v", ex.Status, st))
		}
	}
	if len(bad) > 0 {
		r.set(CheckProblemJSON, Fail, fmt.Sprintf("%d of %d error answers are not problem documents: %s", len(bad), len(errs), strings.Join(dedupe(why), "; ")), bad...)
		return
	}
	r.set(CheckProblemJSON, Pass, fmt.Sprintf("all %d error answers (%s)", len(errs), tally(errs)), errs...)
}

func orNone(s string) string {
	if s == "" {
		return "without Content-Type"
	}
	return s
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// checkScope runs scope-isolation: principal A makes a request, principal
// B sends the same key and body.
func (r *run) checkScope(ctx context.Context) {
	if len(r.c.AuthA) == 0 {
		r.skip("no -auth-a and -auth-b", CheckScopeIsolation)
		return
	}
	a := r.sd.send(ctx, r.plan.scopeA)
	if !a.success() {
		r.set(CheckScopeIsolation, Fail, fmt.Sprintf("principal a's request answered %s, want 2xx: check -auth-a", a.outcome()), a)
		return
	}
	b := r.sd.send(ctx, r.plan.scopeB)
	switch {
	case !b.answered():
		r.set(CheckScopeIsolation, Fail, "principal b's request got no answer: "+b.Error, a, b)
	case b.replayed():
		r.set(CheckScopeIsolation, Fail, fmt.Sprintf("principal b's request was answered %d as a replay: keys are shared between principals", b.Status), a, b)
	case b.success() && a.identified() && sameResource(a, b):
		r.set(CheckScopeIsolation, Fail, fmt.Sprintf("principal b got principal a's answer (%s)", describeResource(a)), a, b)
	case b.success() && !a.identified() && bytes.Equal(a.body, b.body):
		r.set(CheckScopeIsolation, Warn, "principal b got the same bytes as a, and the answers name no resource: cannot tell a replay from a run of its own", a, b)
	case b.success():
		r.set(CheckScopeIsolation, Pass, fmt.Sprintf("principal b's request ran on its own (%d, %s)", b.Status, describeResource(b)), a, b)
	case b.clientError() && b.Status != http.StatusRequestTimeout && b.Status != http.StatusTooManyRequests:
		// a's request has been answered: b's key is new in b's scope, and
		// only a key space shared with a holds it in progress, bound to a
		// body, or owned by a (409, 422, or a server's own status for
		// either: Stripe's 400, a 403 "not your key"), unless b is refused
		// whatever the key (a validation 422 of b's account, a 403 of its
		// permissions): b's body with a key of its own tells.
		alone := r.sd.send(ctx, r.plan.scopeBAlone)
		keyTaken := b.Status == http.StatusConflict || b.Status == http.StatusUnprocessableEntity
		switch {
		case alone.answered() && alone.Status == b.Status:
			r.set(CheckScopeIsolation, Warn, fmt.Sprintf("principal b's request answered %d, and %d again with a key of its own: principal b could not run the operation, so isolation is not shown; check -auth-b", b.Status, alone.Status), a, b, alone)
		case alone.success() || keyTaken:
			r.set(CheckScopeIsolation, Fail, fmt.Sprintf("principal b's request was refused with %d, as a used key is, and answered %s with a key of its own: keys are shared between principals", b.Status, alone.outcome())+goneNote(b), a, b, alone)
		default:
			r.set(CheckScopeIsolation, Warn, fmt.Sprintf("principal b's request answered %d, and %s with a key of its own: principal b could not run the operation, so isolation is not shown; check -auth-b", b.Status, alone.outcome()), a, b, alone)
		}
	default:
		r.set(CheckScopeIsolation, Warn, fmt.Sprintf("principal b's request answered %d: principal b could not run the operation, so isolation is not shown; check -auth-b", b.Status), a, b)
	}
}

// checkTTL runs ttl-expiry: the first request's key, re-sent once TTL and
// its grace have passed since its answer, executes anew.
func (r *run) checkTTL(ctx context.Context, first Exchange, cs *counts) error {
	if r.c.TTL <= 0 {
		r.skip("no -ttl", CheckTTLExpiry)
		return nil
	}
	if !wait(ctx, time.Until(first.sent.Add(r.c.TTL+ttlGrace(r.c.TTL)))) {
		return ctx.Err()
	}
	before := r.read(ctx, cs)
	again := r.sd.send(ctx, r.plan.ttl)
	after := r.read(ctx, cs)
	// A count by size cannot tell a record from a longer one: only a
	// count of records decides here.
	counted := cs.on && cs.err == nil && !cs.bySize
	unit := int64(0)
	if counted && len(cs.readings) > 1 {
		unit = cs.readings[1] - cs.readings[0]
	}
	after2 := fmt.Sprintf("re-sent %v after the first answer", time.Since(first.sent).Round(time.Millisecond))
	switch {
	case !again.answered():
		r.set(CheckTTLExpiry, Fail, "no answer: "+again.Error, first, again)
	case again.replayed():
		r.set(CheckTTLExpiry, Fail, fmt.Sprintf("%s, it was still replayed (%d): the key was not freed", after2, again.Status)+goneNote(again), first, again)
	case !again.success():
		r.set(CheckTTLExpiry, Fail, fmt.Sprintf("%s, it answered %d, want a new execution (2xx)", after2, again.Status)+goneNote(again), first, again)
	case counted && unit > 0 && after-before == unit:
		r.set(CheckTTLExpiry, Pass, fmt.Sprintf("%s, it ran again: the count went from %d to %d", after2, before, after), first, again)
	case counted && unit > 0 && after == before:
		r.set(CheckTTLExpiry, Fail, fmt.Sprintf("%s, it added no record (count %d)", after2, after), first, again)
	case first.identified() && sameResource(first, again):
		r.set(CheckTTLExpiry, Fail, fmt.Sprintf("%s, it answered with the first resource (%s): the key was not freed", after2, describeResource(first)), first, again)
	case !first.identified() && bytes.Equal(first.body, again.body):
		r.set(CheckTTLExpiry, Warn, after2+", it answered the same bytes, unmarked, and the answers name no resource: cannot tell a run from a replay", first, again)
	default:
		r.set(CheckTTLExpiry, Pass, fmt.Sprintf("%s, it ran again (%d, %s)", after2, again.Status, describeResource(again)), first, again)
	}
	return nil
}

// ttlGrace is how long past the stated retention ttl-expiry waits before it
// re-sends: a hundredth of it, at least 100 ms. A server's retention
// starts when its store records the outcome, which may follow the answer
// by a round trip, and a store may round its expiry (pgstore keeps a row
// up to a thousandth of its ttl longer); a key still replayed past the
// grace was not freed.
func ttlGrace(ttl time.Duration) time.Duration { return max(ttl/100, 100*time.Millisecond) }
