package fhirserver

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
// different criteria. The key is Config.CursorKey; servers behind one load
// balancer share it so that any of them can continue a page.

const macBytes = 16 // 128-bit tag: forging one is out of reach

func (s *Server) sealCursor(scope, cursor string) string {
	return base64.RawURLEncoding.EncodeToString(s.cursorMAC(scope, cursor)) + "." + cursor
}

func (s *Server) openCursor(scope, sealed string) (string, error) {
	tag, cursor, ok := strings.Cut(sealed, ".")
	mac, err := base64.RawURLEncoding.DecodeString(tag)
	if !ok || err != nil || !hmac.Equal(mac, s.cursorMAC(scope, cursor)) {
		return "", outcome.New(http.StatusBadRequest, "invalid",
			"the _cursor parameter is not a page link this server issued for this search; start again from the first page")
	}
	return cursor, nil
}

func (s *Server) cursorMAC(scope, cursor string) []byte {
	m := hmac.New(sha256.New, s.cfg.CursorKey)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write([]byte(cursor))
	return m.Sum(nil)[:macBytes]
}
