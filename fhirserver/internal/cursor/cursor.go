// Package cursor seals page cursors.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Page cursors are the store's keyset cursors sealed with an HMAC over the
// cursor and the search it belongs to: a client can neither forge a cursor
// (to walk past the end of a page it may not see) nor replay one against
// different criteria. The key is fhirserver.Config.CursorKey; servers
// behind one load balancer share it so that any of them can continue a
// page.

const macBytes = 16 // 128-bit tag: forging one is out of reach

// Seal binds the store's cursor to scope, the search it continues.
func Seal(key []byte, scope, cursor string) string {
	return base64.RawURLEncoding.EncodeToString(mac(key, scope, cursor)) + "." + cursor
}

// Open returns the store's cursor a sealed one holds, if it was sealed
// with key for scope (400 otherwise).
func Open(key []byte, scope, sealed string) (string, error) {
	tag, cursor, ok := strings.Cut(sealed, ".")
	got, err := base64.RawURLEncoding.DecodeString(tag)
	if !ok || err != nil || !hmac.Equal(got, mac(key, scope, cursor)) {
		return "", outcome.New(http.StatusBadRequest, "invalid",
			"the _cursor parameter is not a page link this server issued for this search; start again from the first page")
	}
	return cursor, nil
}

func mac(key []byte, scope, cursor string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write([]byte(cursor))
	return m.Sum(nil)[:macBytes]
}
