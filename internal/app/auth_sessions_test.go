package app_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
)

// Sessions really end: logout ends the refresh tokens of its session too;
// disabling a user or resetting their password refuses the tokens they
// already hold at once on this instance, and within the verify cache's
// 5 s on another one sharing the store.
func TestSessionsEnd(t *testing.T) {
	h := newAuthHarness(t, nil)
	const email, password = "nurse@example.org", "a long password 1"
	h.addUser(email, auth.RoleProvider, "patients:read", password)
	login := func() (access, refresh string) {
		t.Helper()
		r := h.login(email, password)
		if r.status != http.StatusOK {
			t.Fatalf("login: %d %s", r.status, r.body)
		}
		m := r.json(t)
		return m["access_token"].(string), m["refresh_token"].(string)
	}
	refreshes := func(refresh string) int {
		t.Helper()
		return h.form("/auth/token", "", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}).status
	}
	read := func(tok string) response {
		t.Helper()
		return h.do(http.MethodGet, "/fhir/Patient", tok, nil)
	}

	t.Run("logout ends the session's refresh tokens", func(t *testing.T) {
		tok, refresh := login()
		if r := h.do(http.MethodPost, "/auth/logout", tok, nil); r.status != http.StatusOK {
			t.Fatalf("logout: %d %s", r.status, r.body)
		}
		expectInvalidToken(t, read(tok))
		if s := refreshes(refresh); s != http.StatusBadRequest {
			t.Errorf("refresh after logout: %d, want 400 invalid_grant", s)
		}
		// Another session of the same user goes on.
		tok2, refresh2 := login()
		if r := read(tok2); r.status != http.StatusOK || refreshes(refresh2) != http.StatusOK {
			t.Errorf("another session after a logout: read %d", r.status)
		}
	})

	t.Run("disable", func(t *testing.T) {
		tok, refresh := login()
		if r := read(tok); r.status != http.StatusOK {
			t.Fatalf("read: %d", r.status)
		}
		h.clock.Advance(time.Millisecond)
		if _, err := h.svc.SetDisabled(t.Context(), email, true); err != nil {
			t.Fatal(err)
		}
		expectInvalidToken(t, read(tok))
		if s := refreshes(refresh); s != http.StatusBadRequest {
			t.Errorf("refresh of a disabled user: %d", s)
		}
		if _, err := h.svc.SetDisabled(t.Context(), email, false); err != nil {
			t.Fatal(err)
		}
		expectInvalidToken(t, read(tok)) // enabling does not bring old tokens back
		h.clock.Advance(time.Millisecond)
		if tok2, _ := login(); read(tok2).status != http.StatusOK {
			t.Error("a login after the account was enabled again is refused")
		}
	})

	t.Run("password reset, seen by another instance", func(t *testing.T) {
		h.clock.Advance(time.Millisecond)
		tok, _ := login()
		other := auth.NewTokens(h.svc.Keys, h.records, h.base, h.base+"/fhir", h.clock.Now)
		if _, err := other.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Millisecond)
		if _, _, err := h.svc.ResetPassword(t.Context(), email, "another long password"); err != nil {
			t.Fatal(err)
		}
		expectInvalidToken(t, read(tok))
		h.clock.Advance(5 * time.Second) // the other instance's verify cache rechecks
		if _, err := other.Verify(t.Context(), tok); err == nil {
			t.Error("another instance still accepts the token 5 s after the reset")
		}
	})
}
