package legacyapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// Idempotency-Key on POST (the IETF httpapi draft's header): the first
// request with a key reserves it, per authenticated subject (two callers
// may use the same key), in the store's records (kind "idempotency"), so
// every server sharing the store sees it. A retry with the same key and
// the same body (compared as JSON: the order of fields and blanks do not
// matter) gets the first answer again, same status and body, with
// Idempotent-Replayed: true, and creates nothing. The same key with
// another body is a 422 (idempotency_key_reused). While the first request
// runs, a retry waits up to idempotencyWait and then gets 409
// (request_in_progress) with Retry-After. Answers are kept 24 hours; only
// successes are kept: after an error the key is released, so the client
// may retry with it. PutRecord's compare-and-swap decides between
// concurrent first uses.
const (
	idempotencyKind = "idempotency"
	idempotencyTTL  = 24 * time.Hour
	// pendingTTL outlives the middleware's request deadline (2 minutes):
	// a reservation left by a crashed server frees itself.
	pendingTTL      = 3 * time.Minute
	idempotencyWait = 5 * time.Second
	maxKeyLength    = 255
)

type idemRecord struct {
	State    string          `json:"state"`   // "pending" or "done"
	Request  string          `json:"request"` // SHA-256 of the canonical body
	Status   int             `json:"status,omitempty"`
	Body     json.RawMessage `json:"body,omitempty"`
	Location string          `json:"location,omitempty"`
}

// idempotent is a reserved key; nil when the request had none.
type idempotent struct {
	a       *API
	records Records
	id      string
	version int64
	request string
}

func validKey(k string) bool {
	if len(k) == 0 || len(k) > maxKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// beginIdempotent reserves the key, or answers the request itself (done):
// a replay, a 422 for another body, a 409 while the first is in progress,
// a 400 for a malformed key.
func (a *API) beginIdempotent(w http.ResponseWriter, r *http.Request, records Records, subject string, keys []string, canon []byte) (*idempotent, bool) {
	if len(keys) != 1 || !validKey(keys[0]) {
		httpserver.WriteErrorDetails(w, http.StatusBadRequest, "invalid_request", "invalid Idempotency-Key",
			[]httpserver.FieldProblem{{Field: "Idempotency-Key", Problem: "must be one header of 1-255 printable ASCII characters"}})
		return nil, true
	}
	ctx := r.Context()
	id := sha256.Sum256([]byte(subject + "\x00" + keys[0]))
	req := sha256.Sum256(canon)
	x := &idempotent{a: a, records: records, id: hex.EncodeToString(id[:]), request: hex.EncodeToString(req[:])}
	deadline := time.Now().Add(idempotencyWait)
	for {
		rec, err := records.GetRecord(ctx, idempotencyKind, x.id)
		if errors.Is(err, store.ErrNotFound) {
			value, _ := json.Marshal(idemRecord{State: "pending", Request: x.request})
			err = records.PutRecord(ctx, store.Record{Kind: idempotencyKind, ID: x.id, Version: 1, Value: value, Expires: time.Now().Add(pendingTTL)})
			if errors.Is(err, store.ErrConflict) {
				if time.Now().Before(deadline) && ctx.Err() == nil {
					continue // another request reserved it first: look again
				}
				w.Header().Set("Retry-After", "1")
				httpserver.WriteError(w, http.StatusConflict, "request_in_progress", "a request with this Idempotency-Key is still in progress; retry later")
				return nil, true
			}
			if err != nil {
				a.fail(w, r, err)
				return nil, true
			}
			x.version = 1
			return x, false
		}
		if err != nil {
			a.fail(w, r, err)
			return nil, true
		}
		var v idemRecord
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			a.fail(w, r, err)
			return nil, true
		}
		if v.Request != x.request {
			httpserver.WriteError(w, http.StatusUnprocessableEntity, "idempotency_key_reused",
				"this Idempotency-Key was used with another body; use a new key for a new request")
			return nil, true
		}
		if v.State == "done" {
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, v.Status, v.Body, v.Location)
			return nil, true
		}
		if time.Now().After(deadline) {
			w.Header().Set("Retry-After", "1")
			httpserver.WriteError(w, http.StatusConflict, "request_in_progress", "a request with this Idempotency-Key is still in progress; retry later")
			return nil, true
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			a.fail(w, r, ctx.Err())
			return nil, true
		}
	}
}

// createOnce answers a POST that creates something: create runs once per
// Idempotency-Key (when the request has one, reserved in records per
// caller subject; canon is the request's canonical body), and its answer,
// 201 with body and Location, is kept for the key's retries.
func (a *API) createOnce(w http.ResponseWriter, r *http.Request, records Records, subject string, canon []byte,
	create func(ctx context.Context) (body []byte, location string, err error)) {
	ctx := r.Context()
	var idem *idempotent
	if key, present := r.Header["Idempotency-Key"]; present {
		var done bool
		idem, done = a.beginIdempotent(w, r, records, subject, key, canon)
		if done {
			return
		}
	}
	body, location, err := create(ctx)
	if err != nil {
		idem.abandon(ctx)
		a.fail(w, r, err)
		return
	}
	idem.complete(ctx, http.StatusCreated, body, location)
	writeRaw(w, http.StatusCreated, body, location)
}

// complete keeps the answer for the key's retries. A failure to keep it
// is logged: the request itself succeeded.
func (x *idempotent) complete(ctx context.Context, status int, body []byte, location string) {
	if x == nil {
		return
	}
	value, _ := json.Marshal(idemRecord{State: "done", Request: x.request, Status: status, Body: body, Location: location})
	err := x.records.PutRecord(context.WithoutCancel(ctx), store.Record{Kind: idempotencyKind, ID: x.id, Version: x.version + 1,
		Value: value, Expires: time.Now().Add(idempotencyTTL)})
	if err != nil {
		x.a.cfg.Logger.WarnContext(ctx, "keeping an idempotent answer failed", "request_id", httpserver.RequestID(ctx), "err", err)
	}
}

// abandon releases the key after a failed request, if it is still ours.
func (x *idempotent) abandon(ctx context.Context) {
	if x == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if rec, err := x.records.GetRecord(ctx, idempotencyKind, x.id); err == nil && rec.Version == x.version {
		_ = x.records.DeleteRecord(ctx, idempotencyKind, x.id)
	}
}
