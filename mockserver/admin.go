package mockserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

// AdminPrefix starts the path of every admin endpoint: fault injection and
// inspection over HTTP, for clients that are not written in Go. Requests
// under it are not subject to the injected latency.
const AdminPrefix = "/_mock/"

// maxAdminBody bounds the body of an admin request: a longer one is
// refused whole, never decoded from its first maxAdminBody bytes.
const maxAdminBody = 64 << 10

// maxAdminMS bounds delay_ms and latency_ms (one hour), which keeps their
// conversion to time.Duration far from overflowing.
const maxAdminMS = int64(time.Hour / time.Millisecond)

// The bodies of the admin endpoints that inject faults, one type each, so
// that a field of another endpoint is as unknown as a misspelt one. A nil
// field was absent.
type (
	// failRequest is the body of POST /_mock/fail.
	failRequest struct {
		Count  *int `json:"count"`
		Status *int `json:"status"`
	}
	// dropRequest is the body of POST /_mock/drop-after-commit.
	dropRequest struct {
		Count *int `json:"count"`
	}
	// delayRequest is the body of POST /_mock/delay.
	delayRequest struct {
		Count   *int   `json:"count"`
		DelayMS *int64 `json:"delay_ms"`
	}
	// latencyRequest is the body of PUT /_mock/latency.
	latencyRequest struct {
		LatencyMS *int64 `json:"latency_ms"`
	}
)

// adminRoutes are the admin API's routes, with the methods the package doc
// gives them.
func (s *Server) adminRoutes() []route {
	post := func(h http.HandlerFunc) methods { return methods{http.MethodPost: h} }
	return []route{
		{AdminPrefix + "fail", post(s.adminFail)},
		{AdminPrefix + "drop-after-commit", post(s.adminDrop)},
		{AdminPrefix + "delay", post(s.adminDelay)},
		{AdminPrefix + "latency", methods{http.MethodPut: http.HandlerFunc(s.adminLatency)}},
		{AdminPrefix + "faults", methods{
			http.MethodGet:    http.HandlerFunc(s.adminFaults),
			http.MethodDelete: http.HandlerFunc(s.adminClearFaults),
		}},
		{AdminPrefix + "expire-keys", post(s.adminExpireKeys)},
		{AdminPrefix + "reset", post(s.adminReset)},
		{AdminPrefix + "keys", methods{http.MethodGet: http.HandlerFunc(s.adminKeys)}},
		{AdminPrefix + "keys/{key...}", methods{http.MethodGet: http.HandlerFunc(s.adminKey)}},
	}
}

// readAdminBody decodes an admin request body into a T: one JSON object of
// T's fields only, named to the letter, each an integer in its range
// (adminRanges), and nothing after it but white
// space, so that a misspelt field, one in another case, or one of another
// endpoint, is an error rather than a silent default. Its details are in
// the API's words, never Go's (adminDecodeDetail). An empty body is an empty request; an endpoint that takes
// no field reads a struct{}, which refuses every field.
// It answers a body it refuses, one over maxAdminBody included, with a 400
// problem and reports false.
func readAdminBody[T any](w http.ResponseWriter, r *http.Request) (T, bool) {
	var fr T
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		badAdmin(w, fmt.Sprintf("body is over %d bytes", maxAdminBody))
		return fr, false
	}
	body = jsonText(body)
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		// Decode takes a null for a T of zero fields, as if no body
		// came: the body must be an object.
		if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
			err = errors.New("null is no JSON object")
		} else {
			err = exactFieldNames(body, adminFields[T]())
		}
	}
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		// Decode stops after the value; More would not see a stray '}'
		// or ']' after it.
		if err = dec.Decode(&fr); err == nil && len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
			err = errors.New("more than one JSON value")
		}
		if err != nil {
			badAdmin(w, adminDecodeDetail(err))
			return fr, false
		}
	}
	if err != nil {
		badAdmin(w, "body must be a JSON object of the documented fields: "+err.Error())
		return fr, false
	}
	if err := checkAdminRanges(fr); err != nil {
		badAdmin(w, err.Error())
		return fr, false
	}
	return fr, true
}

// adminFields returns the JSON names of T's fields, as documented.
func adminFields[T any]() []string {
	t := reflect.TypeFor[T]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// exactFieldNames refuses a member of the object in body whose name is
// not one of fields to the letter, or that names a field already given.
// encoding/json matches a name to a field whatever its case, and takes
// {"Count":5} or {"COUNT":5} for count, and the last of a field given
// twice, where another parser takes the first: a strict API says which
// name it does not take. Names compare as JSON strings, escapes decoded.
// A body that is no object, or not JSON, passes, for Decode to say what
// is wrong with it.
func exactFieldNames(body []byte, fields []string) error {
	var given []string
	for name := range memberNames(body) {
		if !slices.Contains(fields, name) {
			if len(fields) == 0 {
				return fmt.Errorf("unknown field %q: this endpoint takes no field", name)
			}
			return fmt.Errorf("unknown field %q: the fields are %s, in lower case", name, strings.Join(fields, ", "))
		}
		if slices.Contains(given, name) {
			return fmt.Errorf("field %q is given more than once", name)
		}
		given = append(given, name)
	}
	return nil
}

// requiredMillis converts the delay_ms or latency_ms field called name,
// ms, in range (readAdminBody checked it), to a duration. Its error, for
// a field that is absent, is the detail of a 400 answer.
func requiredMillis(name string, ms *int64) (time.Duration, error) {
	if ms == nil {
		return 0, errors.New(name + " is required")
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func badAdmin(w http.ResponseWriter, detail string) {
	writeProblem(w, problem{Type: ProblemBadAdminRequest, Title: "Bad admin request", Status: http.StatusBadRequest, Detail: detail})
}

// count returns the count field n, 1 when absent.
func count(n *int) int {
	if n == nil {
		return 1
	}
	return *n
}

func (s *Server) adminFail(w http.ResponseWriter, r *http.Request) {
	injectFault(s, w, r, func(fr failRequest) error {
		// An absent status is 503; a status given, 0 included, must be in
		// range.
		status := http.StatusServiceUnavailable
		if fr.Status != nil {
			status = *fr.Status
		}
		return s.faults.addFail(count(fr.Count), status)
	})
}

func (s *Server) adminDrop(w http.ResponseWriter, r *http.Request) {
	injectFault(s, w, r, func(fr dropRequest) error { return s.faults.addDrop(count(fr.Count)) })
}

func (s *Server) adminDelay(w http.ResponseWriter, r *http.Request) {
	injectFault(s, w, r, func(fr delayRequest) error {
		d, err := requiredMillis("delay_ms", fr.DelayMS)
		if err != nil {
			return err
		}
		return s.faults.addDelay(count(fr.Count), d)
	})
}

func (s *Server) adminLatency(w http.ResponseWriter, r *http.Request) {
	injectFault(s, w, r, func(fr latencyRequest) error {
		d, err := requiredMillis("latency_ms", fr.LatencyMS)
		if err != nil {
			return err
		}
		return s.faults.setLatency(d)
	})
}

// injectFault serves a fault-injecting admin request whose body is a T:
// it decodes the body, has inject apply it, and answers 400 with the
// error's message when inject refuses it, else with the faults now
// pending.
func injectFault[T any](s *Server, w http.ResponseWriter, r *http.Request, inject func(T) error) {
	fr, ok := readAdminBody[T](w, r)
	if !ok {
		return
	}
	if err := inject(fr); err != nil {
		badAdmin(w, err.Error())
		return
	}
	s.adminFaults(w, r)
}

func (s *Server) adminFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.faults.snapshot())
}

func (s *Server) adminClearFaults(w http.ResponseWriter, r *http.Request) {
	if _, ok := readAdminBody[struct{}](w, r); !ok {
		return
	}
	s.faults.clear()
	s.adminFaults(w, r)
}

// epochResponse is the answer of POST /_mock/expire-keys and /_mock/reset.
type epochResponse struct {
	Epoch int64 `json:"epoch"`
}

func (s *Server) adminExpireKeys(w http.ResponseWriter, r *http.Request) {
	if _, ok := readAdminBody[struct{}](w, r); !ok {
		return
	}
	s.ExpireKeys()
	writeJSON(w, http.StatusOK, epochResponse{Epoch: s.epoch.Load()})
}

// adminReset answers 503 when the ledger could not be reset: its payments
// would otherwise count in the next scenario as if made there. A reset
// once started is not cut short by a client that goes away, which would
// leave the ledger behind the rest; a ledger that does not answer is given
// up after the server's ledger bound (ledgerContext).
func (s *Server) adminReset(w http.ResponseWriter, r *http.Request) {
	if _, ok := readAdminBody[struct{}](w, r); !ok {
		return
	}
	if err := s.reset(context.WithoutCancel(r.Context())); err != nil {
		s.log(r.Context(), "mockserver: resetting the ledger failed", "error", err)
		ledgerFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, epochResponse{Epoch: s.epoch.Load()})
}

// adminKeys and adminKey answer 503 when the ledger cannot be read, rather
// than a count of 0 payments that reads as a lost payment.
func (s *Server) adminKeys(w http.ResponseWriter, r *http.Request) {
	all, err := s.keys(r.Context())
	if err != nil {
		ledgerFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, all)
}

func (s *Server) adminKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if key == "" {
		badAdmin(w, fmt.Sprintf("want %skeys/{key}", AdminPrefix))
		return
	}
	ks, err := s.stats(r.Context(), key)
	if err != nil {
		ledgerFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ks)
}
