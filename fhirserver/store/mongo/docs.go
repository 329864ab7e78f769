package mongo

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// resDoc is a resource document: the current version and its index rows.
// Field names are short because every one is repeated in every document.
type resDoc struct {
	Key     string `bson:"_id"` // "Type/id"
	Type    string `bson:"t"`
	ID      string `bson:"id"`
	Version int64  `bson:"v"`
	LU      int64  `bson:"lu"` // unix microseconds
	Method  string `bson:"m"`
	Deleted bool   `bson:"del"`
	Body    []byte `bson:"body,omitempty"`
	// R orders resources by creation (clock.next at version 1): the
	// default search order and the last sort key of every other.
	R           int64 `bson:"r"`
	IndexFields `bson:",inline"`
}

// IndexFields are the index rows of a version, one field per row shape.
type IndexFields struct {
	Keys    []string           `bson:"k"`
	Present []string           `bson:"p"`
	Dates   []dateDoc          `bson:"d"`
	Numbers []numDoc           `bson:"n"`
	Sorts   map[string]sortDoc `bson:"s"`
}

// dateDoc and numDoc are search.DateRow and search.NumberRow with short
// field names (they repeat in every document); the types convert.
type dateDoc struct {
	Param string `bson:"p"`
	Low   int64  `bson:"lo"`
	High  int64  `bson:"hi"`
}

type numDoc struct {
	Param string  `bson:"p"`
	Low   float64 `bson:"lo"`
	High  float64 `bson:"hi"`
}

type sortDoc struct {
	Lo any `bson:"lo"`
	Hi any `bson:"hi"`
}

// histDoc is one version in the history collection.
type histDoc struct {
	Seq     int64  `bson:"_id"`
	Type    string `bson:"t"`
	ID      string `bson:"id"`
	Version int64  `bson:"v"`
	LU      int64  `bson:"lu"`
	Method  string `bson:"m"`
	Deleted bool   `bson:"del"`
	Body    []byte `bson:"body,omitempty"`
	// NextLU and NextSeq are set once the next version is written: the
	// moment this one stopped being current (the _at query).
	NextLU  *int64 `bson:"nlu,omitempty"`
	NextSeq *int64 `bson:"nseq,omitempty"`
}

func docKey(typ, id string) string { return typ + "/" + id }

// fieldName makes a parameter code safe as a document field name: MongoDB
// reads "." as a path and "$" as an operator.
func fieldName(param string) string {
	if !strings.ContainsAny(param, ".$%") && param != "" {
		return param
	}
	r := strings.NewReplacer("%", "%25", ".", "%2E", "$", "%24")
	return "%" + r.Replace(param)
}

// sortField is the path of a parameter's sort value: the least value for
// ascending order, the greatest for descending.
func sortField(param string, desc bool) string {
	if desc {
		return "s." + fieldName(param) + ".hi"
	}
	return "s." + fieldName(param) + ".lo"
}

// rowsOf converts search rows to document fields; nil rows give empty
// fields, so a tombstone or an unindexed version matches no clause.
func rowsOf(r *search.Rows) IndexFields {
	f := IndexFields{Keys: []string{}, Present: []string{}, Dates: []dateDoc{}, Numbers: []numDoc{}, Sorts: map[string]sortDoc{}}
	if r == nil {
		return f
	}
	f.Keys = append(f.Keys, r.Keys...)
	for _, d := range r.Dates {
		f.Dates = append(f.Dates, dateDoc(d))
	}
	for _, n := range r.Numbers {
		f.Numbers = append(f.Numbers, numDoc(n))
	}
	for _, s := range r.Sorts {
		f.Present = append(f.Present, s.Param)
		f.Sorts[fieldName(s.Param)] = sortDoc{s.Lo, s.Hi}
	}
	return f
}

// set is f as the $set fields that replace a resource document's rows.
func (f IndexFields) set() bson.D {
	return bson.D{{Key: "k", Value: f.Keys}, {Key: "p", Value: f.Present},
		{Key: "d", Value: f.Dates}, {Key: "n", Value: f.Numbers}, {Key: "s", Value: f.Sorts}}
}

// version is the store form of a resource document.
func (d *resDoc) version() *store.Version {
	return &store.Version{Type: d.Type, ID: d.ID, Version: d.Version, LastUpdated: fromMicros(d.LU),
		Method: store.Method(d.Method), Deleted: d.Deleted, Body: d.Body}
}

func (d *histDoc) version() *store.Version {
	return &store.Version{Type: d.Type, ID: d.ID, Version: d.Version, LastUpdated: fromMicros(d.LU),
		Method: store.Method(d.Method), Deleted: d.Deleted, Body: d.Body}
}

// versionFields are the fields a read needs (no index rows).
var versionFields = bson.D{{Key: "t", Value: 1}, {Key: "id", Value: 1}, {Key: "v", Value: 1}, {Key: "lu", Value: 1},
	{Key: "m", Value: 1}, {Key: "del", Value: 1}, {Key: "body", Value: 1}, {Key: "r", Value: 1}}
