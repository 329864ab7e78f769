package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// zeroHash is the prev of record 1.
var zeroHash = strings.Repeat("0", 64)

// chainFields are the values of the audit-chain extension.
type chainFields struct {
	Seq  int64
	Prev string // hex SHA-256 of record Seq-1, zeroHash for Seq 1
	Hash string // hex SHA-256; empty in the canonical bytes
}

// idFor is the resource id of record seq.
func idFor(seq int64) string { return fmt.Sprintf("ae-%012d", seq) }

// seqOf parses an id made by idFor.
func seqOf(id string) (int64, bool) {
	if len(id) < 15 || !strings.HasPrefix(id, "ae-") {
		return 0, false
	}
	n, err := strconv.ParseInt(id[3:], 10, 64)
	if err != nil || n < 1 || idFor(n) != id {
		return 0, false
	}
	return n, true
}

// The JSON shape of an AuditEvent, in element order.
type (
	// jsonAuditEvent holds the elements of an event; assemble adds
	// resourceType, id and meta before them and the chain extension after.
	jsonAuditEvent struct {
		Type        jsonCoding   `json:"type"`
		Subtype     []jsonCoding `json:"subtype,omitempty"`
		Action      Action       `json:"action,omitempty"`
		Recorded    string       `json:"recorded"`
		Outcome     Outcome      `json:"outcome,omitempty"`
		OutcomeDesc string       `json:"outcomeDesc,omitempty"`
		Agent       []jsonAgent  `json:"agent"`
		Source      jsonSource   `json:"source"`
		Entity      []jsonEntity `json:"entity,omitempty"`
	}
	jsonCoding struct {
		System  string `json:"system,omitempty"`
		Code    string `json:"code,omitempty"`
		Display string `json:"display,omitempty"`
	}
	jsonConcept struct {
		Coding []jsonCoding `json:"coding,omitempty"`
		Text   string       `json:"text,omitempty"`
	}
	jsonIdentifier struct {
		System string `json:"system,omitempty"`
		Value  string `json:"value"`
	}
	jsonReference struct {
		Reference  string          `json:"reference,omitempty"`
		Identifier *jsonIdentifier `json:"identifier,omitempty"`
		Display    string          `json:"display,omitempty"`
	}
	jsonNetwork struct {
		Address string `json:"address"`
		Type    string `json:"type"`
	}
	jsonAgent struct {
		Type      *jsonConcept   `json:"type,omitempty"`
		Role      []jsonConcept  `json:"role,omitempty"`
		Who       *jsonReference `json:"who,omitempty"`
		Requestor bool           `json:"requestor"`
		Network   *jsonNetwork   `json:"network,omitempty"`
	}
	jsonSource struct {
		Site     string        `json:"site,omitempty"`
		Observer jsonReference `json:"observer"`
		Type     []jsonCoding  `json:"type,omitempty"`
	}
	jsonEntity struct {
		What   *jsonReference `json:"what,omitempty"`
		Type   *jsonCoding    `json:"type,omitempty"`
		Role   *jsonCoding    `json:"role,omitempty"`
		Query  string         `json:"query,omitempty"`
		Detail []jsonDetail   `json:"detail,omitempty"`
	}
	jsonDetail struct {
		Type        string `json:"type"`
		ValueString string `json:"valueString"`
	}
	jsonExtension struct {
		URL         string          `json:"url"`
		Extension   []jsonExtension `json:"extension,omitempty"`
		ValueString *string         `json:"valueString,omitempty"`
	}
)

// instant formats t as a FHIR instant in UTC with microseconds.
func instant(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// resource renders e as the AuditEvent with the given id, meta.lastUpdated,
// source and chain fields. The chain extension is the last element and the
// hash sub-extension the last of it; with chain.Hash empty the result is the
// record's canonical bytes.
func (e Event) resource(id string, lastUpdated time.Time, src Source, chain chainFields) []byte {
	return assemble(id, lastUpdated, chain, e.elements(src))
}

// assemble builds a record around elements, the output of Event.elements:
//
//	{"resourceType":"AuditEvent","id":…,"meta":{"versionId":"1","lastUpdated":…},
//	 <elements>,"extension":[{"url":ChainExtensionURL,"extension":[seq, prev, hash]}]}
//
// (on one line). id, the instant and the chain values hold no character
// that JSON escapes, so they are written as they are.
func assemble(id string, lastUpdated time.Time, chain chainFields, elements []byte) []byte {
	b := make([]byte, 0, len(elements)+400)
	b = append(b, `{"resourceType":"AuditEvent","id":"`...)
	b = append(b, id...)
	b = append(b, `","meta":{"versionId":"1","lastUpdated":"`...)
	b = append(b, instant(lastUpdated)...)
	b = append(b, `"},`...)
	b = append(b, elements...)
	b = append(b, `,"extension":[{"url":"`+ChainExtensionURL+`","extension":[{"url":"seq","valueString":"`...)
	b = strconv.AppendInt(b, chain.Seq, 10)
	b = append(b, `"},{"url":"prev","valueString":"`...)
	b = append(b, chain.Prev...)
	b = append(b, `"},`...)
	b = append(b, hashElement(chain.Hash)...)
	b = append(b, `]}]}`...)
	return b
}

// elements renders the event's own elements (type … entity) as the members
// of a JSON object, without the braces. It is the costly part of a record
// and depends on neither the id nor the chain, so Record runs it on the
// caller's goroutine, not on the writer's.
func (e Event) elements(src Source) []byte {
	e = e.normalize()
	ae := jsonAuditEvent{
		Type:     coding(e.Type),
		Action:   e.Action,
		Recorded: instant(e.Time),
		Outcome:  e.Outcome,
	}
	if !e.Subtype.IsZero() {
		ae.Subtype = []jsonCoding{coding(e.Subtype)}
	}
	if e.Status != 0 {
		ae.OutcomeDesc = "HTTP " + strconv.Itoa(e.Status)
	}

	agent := jsonAgent{
		Type: &jsonConcept{Coding: []jsonCoding{{
			System: SystemDICOM, Code: agentTypeSourceRoleID, Display: agentTypeSourceRoleIDName,
		}}},
		Requestor: true,
	}
	if e.Agent.Role != "" {
		agent.Role = []jsonConcept{{Coding: []jsonCoding{{System: SystemRole, Code: e.Agent.Role}}}}
	}
	if e.Agent.Who != "" || e.Agent.FHIRUser != "" {
		agent.Who = &jsonReference{Reference: e.Agent.FHIRUser}
		if e.Agent.Who != "" {
			agent.Who.Identifier = &jsonIdentifier{System: SystemSubject, Value: e.Agent.Who}
		}
	}
	if e.Agent.Address != "" {
		agent.Network = &jsonNetwork{Address: e.Agent.Address, Type: networkTypeIPAddress}
	}
	ae.Agent = []jsonAgent{agent}

	ae.Source = jsonSource{
		Site:     src.Site,
		Observer: jsonReference{Display: src.Observer},
		Type:     []jsonCoding{{System: SystemAuditSourceType, Code: auditSourceTypeAppServer, Display: "Application Server"}},
	}
	if e.Partition != "" {
		ae.Source.Type = append(ae.Source.Type, jsonCoding{System: SystemPartition, Code: e.Partition})
	}

	obj := &jsonCoding{System: SystemAuditEntityType, Code: entityTypeSystemObject, Display: "System Object"}
	switch {
	case e.Entity.What != "" || e.Entity.Path != "":
		ent := jsonEntity{What: &jsonReference{Reference: e.Entity.What}, Type: obj}
		if e.Entity.What == "" {
			ent.What.Identifier = &jsonIdentifier{System: SystemPlatformPath, Value: e.Entity.Path}
		}
		if e.Entity.Query != "" {
			ent.Role = &jsonCoding{System: SystemObjectRole, Code: objectRoleQuery, Display: "Query"}
			ent.Query = base64.StdEncoding.EncodeToString([]byte(e.Entity.Query))
		}
		ae.Entity = append(ae.Entity, ent)
	case e.Entity.ResourceType != "" || e.Entity.Query != "":
		ent := jsonEntity{Type: obj}
		if e.Entity.ResourceType != "" {
			ent.Type = &jsonCoding{System: SystemResourceTypes, Code: e.Entity.ResourceType}
		}
		if e.Entity.Query != "" {
			ent.Role = &jsonCoding{System: SystemObjectRole, Code: objectRoleQuery, Display: "Query"}
			ent.Query = base64.StdEncoding.EncodeToString([]byte(e.Entity.Query))
		}
		ae.Entity = append(ae.Entity, ent)
	}
	if e.Purged != nil {
		ae.Entity = append(ae.Entity, jsonEntity{
			What:   &jsonReference{Reference: "AuditEvent/" + idFor(e.Purged.Seq)},
			Type:   obj,
			Detail: []jsonDetail{{Type: purgedHashDetail, ValueString: e.Purged.Hash}},
		})
	}
	if e.RequestID != "" {
		ae.Entity = append(ae.Entity, jsonEntity{
			What: &jsonReference{Identifier: &jsonIdentifier{Value: e.RequestID}},
			Type: &jsonCoding{System: SystemBALPEntityType, Code: "XrequestId"},
		})
	}

	b, err := json.Marshal(ae)
	if err != nil {
		panic("audit: marshal AuditEvent: " + err.Error()) // only strings and bools: cannot fail
	}
	return b[1 : len(b)-1]
}

func coding(c Code) jsonCoding { return jsonCoding{System: c.System, Code: c.Code, Display: c.Display} }

// chainHash is hex SHA-256( raw bytes of prev ‖ canonical ).
func chainHash(prev string, canonical []byte) (string, error) {
	p, err := hex.DecodeString(prev)
	if err != nil || len(p) != sha256.Size {
		return "", fmt.Errorf("prev %.70q is not a hex SHA-256", prev)
	}
	h := sha256.New()
	h.Write(p)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// seal renders e as record seq after prev: it returns the stored bytes and
// the record's hash.
func (e Event) seal(lastUpdated time.Time, src Source, seq int64, prev string) ([]byte, string) {
	return seal(e.elements(src), lastUpdated, seq, prev)
}

// seal makes record seq after prev from an event's elements.
func seal(elements []byte, lastUpdated time.Time, seq int64, prev string) ([]byte, string) {
	canonical := assemble(idFor(seq), lastUpdated, chainFields{Seq: seq, Prev: prev}, elements)
	hash, err := chainHash(prev, canonical)
	if err != nil {
		panic("audit: " + err.Error()) // prev comes from a record we parsed or made
	}
	return assemble(idFor(seq), lastUpdated, chainFields{Seq: seq, Prev: prev, Hash: hash}, elements), hash
}

// hashElement is the hash sub-extension with value v, as json.Marshal
// writes it. A string value inside the resource cannot contain it: its
// quotes would be escaped.
func hashElement(v string) []byte {
	return []byte(`{"url":"hash","valueString":"` + v + `"}`)
}

// withHash replaces the hash element with value from by one with value to;
// ok is false unless it occurs exactly once.
func withHash(body []byte, from, to string) ([]byte, bool) {
	old := hashElement(from)
	if bytes.Count(body, old) != 1 {
		return nil, false
	}
	return bytes.Replace(body, old, hashElement(to), 1), true
}

// record is what Verify and NewRecorder read back from a stored body.
type record struct {
	ID       string
	Seq      int64
	Prev     string
	Hash     string // as stored
	Computed string // recomputed from the canonical bytes ("" if impossible)
	// Purged is the checkpoint of a retention record (nil otherwise).
	Purged *Checkpoint
}

// purgedHashDetail is the entity.detail type of a checkpoint's hash.
const purgedHashDetail = "purged-through-hash"

var errNoChain = errors.New("no audit-chain extension")

// parseRecord decodes the chain fields of body and recomputes its hash.
// Err is set when the body is not a chained AuditEvent at all; a hash that
// cannot be recomputed leaves Computed empty.
func parseRecord(body []byte) (record, error) {
	var doc struct {
		ResourceType string          `json:"resourceType"`
		ID           string          `json:"id"`
		Extension    []jsonExtension `json:"extension"`
		Subtype      []jsonCoding    `json:"subtype"`
		Entity       []jsonEntity    `json:"entity"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return record{}, fmt.Errorf("not JSON: %w", err)
	}
	if doc.ResourceType != "AuditEvent" {
		return record{}, fmt.Errorf("resourceType is %q", doc.ResourceType)
	}
	r := record{ID: doc.ID}
	if len(doc.Subtype) == 1 && doc.Subtype[0].System == SubtypePurge.System && doc.Subtype[0].Code == SubtypePurge.Code {
		for _, ent := range doc.Entity {
			if ent.What == nil || len(ent.Detail) != 1 || ent.Detail[0].Type != purgedHashDetail {
				continue
			}
			if seq, ok := seqOf(strings.TrimPrefix(ent.What.Reference, "AuditEvent/")); ok {
				r.Purged = &Checkpoint{Seq: seq, Hash: ent.Detail[0].ValueString}
			}
		}
	}
	found := false
	for _, ext := range doc.Extension {
		if ext.URL != ChainExtensionURL {
			continue
		}
		if found {
			return r, errors.New("two audit-chain extensions")
		}
		found = true
		var seq, prev, hash *string
		for _, sub := range ext.Extension {
			switch sub.URL {
			case "seq":
				seq = sub.ValueString
			case "prev":
				prev = sub.ValueString
			case "hash":
				hash = sub.ValueString
			}
		}
		if seq == nil || prev == nil || hash == nil {
			return r, errors.New("audit-chain extension lacks seq, prev or hash")
		}
		n, err := strconv.ParseInt(*seq, 10, 64)
		if err != nil || n < 1 || strconv.FormatInt(n, 10) != *seq {
			return r, fmt.Errorf("audit-chain seq %.30q is not a positive decimal", *seq)
		}
		r.Seq, r.Prev, r.Hash = n, *prev, *hash
	}
	if !found {
		return r, errNoChain
	}
	if canonical, ok := withHash(body, r.Hash, ""); ok {
		if h, err := chainHash(r.Prev, canonical); err == nil {
			r.Computed = h
		}
	}
	return r, nil
}
