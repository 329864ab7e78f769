package mongo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// maxCursorLen bounds what decodeCursor reads: a cursor holds a few sort
// values and numbers, never kilobytes.
const maxCursorLen = 4096

// encodeCursor is base64url of the BSON of v (a historyCursor or a
// searchCursor). The FHIR layer seals it against tampering; the query hash
// inside rejects a cursor replayed on another query.
func encodeCursor(v any) string {
	b, err := bson.Marshal(v)
	if err != nil {
		// Cursor fields are numbers, strings and sort values read back
		// from documents: always marshalable.
		panic(fmt.Sprintf("mongo store: encode cursor: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses s into v; anything encodeCursor could not have
// produced is store.ErrBadCursor.
func decodeCursor(s string, v any) error {
	bad := func(why string) error {
		return fmt.Errorf("mongo store: cursor %.40q: %s: %w", s, why, store.ErrBadCursor)
	}
	if len(s) > maxCursorLen {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if err := bson.Unmarshal(b, v); err != nil {
		return bad("not a cursor")
	}
	return nil
}

// hashOf is the hash a cursor carries of the query it was issued for. The
// parts are plain values and search IR, which JSON encodes deterministically.
func hashOf(parts ...any) uint32 {
	h := fnv.New32a()
	if err := json.NewEncoder(h).Encode(parts); err != nil {
		// Only a NaN could fail; fall back on a textual form.
		fmt.Fprintf(h, "%v", parts)
	}
	return h.Sum32()
}
