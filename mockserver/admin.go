package mockserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// AdminPrefix starts the path of every admin endpoint: fault injection and
// inspection over HTTP, for clients that are not written in Go. Requests
// under it are not subject to the injected latency.
const AdminPrefix = "/_mock/"

// maxAdminBody bounds the body of an admin request.
const maxAdminBody = 64 << 10

// maxAdminMS bounds delay_ms and latency_ms (one hour), which keeps their
// conversion to time.Duration far from overflowing.
const maxAdminMS = int64(time.Hour / time.Millisecond)

// faultRequest is the body of the admin endpoints that inject faults.
type faultRequest struct {
	Count     *int   `json:"count"`
	Status    int    `json:"status"`
	DelayMS   *int64 `json:"delay_ms"`
	LatencyMS *int64 `json:"latency_ms"`
}

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

// readFault decodes an admin request body: one JSON object of known
// fields, so that a misspelt field is an error rather than a silent default.
// An empty body is an empty request.
func readFault(w http.ResponseWriter, r *http.Request) (faultRequest, bool) {
	var fr faultRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody))
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err = dec.Decode(&fr); err == nil && dec.More() {
			err = errors.New("more than one JSON value")
		}
	}
	if err != nil {
		badAdmin(w, "body must be a JSON object of the documented fields: "+err.Error())
		return fr, false
	}
	return fr, true
}

// requiredMillis converts the delay_ms or latency_ms field called name,
// ms, to a duration. Its error, for a field that is absent or out of
// range, is the detail of a 400 answer.
func requiredMillis(name string, ms *int64) (time.Duration, error) {
	if ms == nil {
		return 0, errors.New(name + " is required")
	}
	if *ms < 0 || *ms > maxAdminMS {
		return 0, fmt.Errorf("%s must be between 0 and %d", name, maxAdminMS)
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func badAdmin(w http.ResponseWriter, detail string) {
	writeProblem(w, problem{Type: ProblemBadAdminRequest, Title: "Bad admin request", Status: http.StatusBadRequest, Detail: detail})
}

// count returns the request's count, 1 when absent.
func (fr faultRequest) count() int {
	if fr.Count == nil {
		return 1
	}
	return *fr.Count
}

func (s *Server) adminFail(w http.ResponseWriter, r *http.Request) {
	s.injectFault(w, r, func(fr faultRequest) error {
		if fr.Status == 0 {
			fr.Status = http.StatusServiceUnavailable
		}
		return s.faults.addFail(fr.count(), fr.Status)
	})
}

func (s *Server) adminDrop(w http.ResponseWriter, r *http.Request) {
	s.injectFault(w, r, func(fr faultRequest) error { return s.faults.addDrop(fr.count()) })
}

func (s *Server) adminDelay(w http.ResponseWriter, r *http.Request) {
	s.injectFault(w, r, func(fr faultRequest) error {
		d, err := requiredMillis("delay_ms", fr.DelayMS)
		if err != nil {
			return err
		}
		return s.faults.addDelay(fr.count(), d)
	})
}

func (s *Server) adminLatency(w http.ResponseWriter, r *http.Request) {
	s.injectFault(w, r, func(fr faultRequest) error {
		d, err := requiredMillis("latency_ms", fr.LatencyMS)
		if err != nil {
			return err
		}
		return s.faults.setLatency(d)
	})
}

// injectFault serves a fault-injecting admin request: it decodes the
// body, has inject apply it, and answers 400 with the error's message
// when inject refuses it, else with the faults now pending.
func (s *Server) injectFault(w http.ResponseWriter, r *http.Request, inject func(faultRequest) error) {
	fr, ok := readFault(w, r)
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
	s.faults.clear()
	s.adminFaults(w, r)
}

// epochResponse is the answer of POST /_mock/expire-keys and /_mock/reset.
type epochResponse struct {
	Epoch int64 `json:"epoch"`
}

func (s *Server) adminExpireKeys(w http.ResponseWriter, _ *http.Request) {
	s.ExpireKeys()
	writeJSON(w, http.StatusOK, epochResponse{Epoch: s.epoch.Load()})
}

func (s *Server) adminReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	writeJSON(w, http.StatusOK, epochResponse{Epoch: s.epoch.Load()})
}

func (s *Server) adminKeys(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Keys())
}

func (s *Server) adminKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if key == "" {
		badAdmin(w, fmt.Sprintf("want %skeys/{key}", AdminPrefix))
		return
	}
	writeJSON(w, http.StatusOK, s.Stats(key))
}
