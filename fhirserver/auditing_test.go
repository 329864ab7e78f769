package fhirserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
)

// events is an Auditor that keeps what it is given.
type events struct {
	mu   sync.Mutex
	list []audit.Event
}

func (e *events) Record(_ context.Context, ev audit.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
	return nil
}

func (e *events) take() []audit.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.list
	e.list = nil
	return out
}

// recorded is an event as the table below states it.
type recorded struct {
	subtype string
	entity  audit.Entity
	status  int
}

func summarize(evs []audit.Event) []recorded {
	var out []recorded
	for _, e := range evs {
		out = append(out, recorded{e.Subtype.Code, e.Entity, e.Status})
	}
	return out
}

// transactionCase needs a store with transactions: FerretDB has none.
const transactionCase = "a transaction and each entry"

// TestAuditNamesWhatTheInteractionDid: each request's one AuditEvent
// names what only the handler learns — a POST search's form, the
// resource a conditional write or a create made, a compartment search's
// compartment, a Bundle's type — and a request that is no interaction
// (an unknown route) records nothing.
func TestAuditNamesWhatTheInteractionDid(t *testing.T) {
	var got events
	h := newHarness(t, func(c *fhirserver.Config) { c.Auditor = &got })
	patient := fixture(t, "patient.json")
	withID := []byte(strings.Replace(string(patient), "{", `{"id":"p1",`, 1))
	if r := h.do("PUT", "/Patient/p1", withID); r.status != http.StatusCreated {
		t.Fatalf("seed: %d %s", r.status, r.body)
	}
	got.take()
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	for _, c := range []struct {
		name, method, path string
		body               []byte
		headers            []string
		want               []recorded
	}{
		{"a POST search records its form", "POST", "/Patient/_search", []byte("family=Okafor"), form,
			[]recorded{{"search", audit.Entity{ResourceType: "Patient", Query: "family=Okafor"}, 200}}},
		{"a conditional update records the resource it changed, and its criteria", "PUT", "/Patient?identifier=urn:oid:2.16.840.1.113883.2.4.6.3|738472983", withID, nil,
			[]recorded{{"update", audit.Entity{What: "Patient/p1", Query: "identifier=urn:oid:2.16.840.1.113883.2.4.6.3|738472983"}, 200}}},
		{"a create records the resource it made", "POST", "/Patient", patient, nil,
			nil}, // checked below: the id is the server's
		{"a compartment search records the compartment", "GET", "/Patient/p1/Observation?code=29463-7", nil, nil,
			[]recorded{{"search", audit.Entity{What: "Patient/p1", ResourceType: "Observation", Query: "code=29463-7"}, 200}}},
		{"an operation on an instance", "GET", "/Patient/p1/$everything", nil, nil,
			[]recorded{{"operation", audit.Entity{What: "Patient/p1"}, 200}}},
		{"a malformed id is a read refused", "GET", "/Patient/a_b", nil, nil,
			[]recorded{{"read", audit.Entity{What: "Patient/a_b"}, 400}}},
		{transactionCase, "POST", "", []byte(`{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"GET","url":"Patient/p1"}},{"request":{"method":"DELETE","url":"Patient/p1"}}]}`), nil,
			[]recorded{{"delete", audit.Entity{What: "Patient/p1"}, 204}, {"read", audit.Entity{What: "Patient/p1"}, 410}, {"transaction", audit.Entity{}, 410}}},
		{"an unknown route is no interaction", "GET", "/Patient/p1/_history/1/more", nil, nil, nil},
	} {
		if c.name == transactionCase && !hasTransactions(t, h) {
			mongotest.NotRun("HTTP "+t.Name()+"/"+c.name, "the store has no multi-document transactions (FerretDB)")
			continue
		}
		r := h.do(c.method, c.path, c.body, c.headers...)
		evs := summarize(got.take())
		if c.want == nil && r.status == http.StatusCreated {
			id, _ := r.json(t)["id"].(string)
			if want := (recorded{"create", audit.Entity{What: "Patient/" + id}, 201}); id == "" || len(evs) != 1 || evs[0] != want {
				t.Errorf("%s: recorded %+v; want %+v", c.name, evs, want)
			}
			continue
		}
		if len(evs) != len(c.want) {
			t.Errorf("%s: %d (%s), recorded %+v; want %+v", c.name, r.status, r.body, evs, c.want)
			continue
		}
		for i := range evs {
			if evs[i] != c.want[i] {
				t.Errorf("%s: recorded %+v; want %+v", c.name, evs[i], c.want[i])
			}
		}
	}
}

// TestAuditInProcessCalls: the in-process API records each call as the
// REST interaction it mirrors, with the status the REST API would answer,
// the caller from the context — and a refusal by the policy too.
func TestAuditInProcessCalls(t *testing.T) {
	var got events
	s := newServiceWith(t, func(c *fhirserver.Config) { c.Auditor = &got })
	writer := as(t.Context(), "user/Patient.cruds")
	reader := as(t.Context(), "user/Observation.rs")
	body := fixture(t, "patient.json")
	_, _ = s.CreateWithID(writer, "Patient", "PT-1", body)
	_, _ = s.CreateWithID(reader, "Patient", "PT-2", body)
	_, _ = s.Read(writer, "Patient", "PT-9")
	_, _ = s.SearchAll(writer, "Patient", map[string][]string{"family": {"Okafor"}}, 10)
	_ = s.Audited(writer, fhirserver.Access{Interaction: fhirserver.Delete, Type: "Patient", ID: "PT-1"}, func(context.Context) error {
		return errors.New("store down")
	})
	_ = s.Audited(writer, fhirserver.Access{Interaction: fhirserver.Delete, Type: "Patient", ID: "PT-3"}, func(context.Context) error {
		return outcome.New(http.StatusNotFound, "not-found", "no such patient")
	})
	want := []recorded{
		{"create", audit.Entity{What: "Patient/PT-1"}, 201},
		{"create", audit.Entity{What: "Patient/PT-2"}, 403},
		{"read", audit.Entity{What: "Patient/PT-9"}, 404},
		{"search", audit.Entity{ResourceType: "Patient", Query: "family=Okafor"}, 200},
		{"delete", audit.Entity{What: "Patient/PT-1"}, 500},
		{"delete", audit.Entity{What: "Patient/PT-3"}, 404},
	}
	evs := got.take()
	if g := summarize(evs); len(g) != len(want) {
		t.Fatalf("recorded %+v; want %+v", g, want)
	}
	for i, e := range summarize(evs) {
		if e != want[i] {
			t.Errorf("call %d: recorded %+v; want %+v", i, e, want[i])
		}
		if evs[i].Agent.Who != "user/test" {
			t.Errorf("call %d: agent %+v, want the caller", i, evs[i].Agent)
		}
	}
}
