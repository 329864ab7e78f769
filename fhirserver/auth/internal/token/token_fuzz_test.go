package token

import (
	"context"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/authtest"
)

// roleProvider is the role of the tokens these tests issue (auth.RoleProvider).
const roleProvider = "provider"

// nonCanonical spells the last base64url character of a segment with its
// unused low bits set: the same bytes, a different string.
func nonCanonical(seg string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var mask int
	switch len(seg) % 4 {
	case 2:
		mask = 0x0f // one byte in the last two characters: 4 unused bits
	case 3:
		mask = 0x03 // two bytes in the last three: 2 unused bits
	default:
		return seg // no unused bits
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[last|mask])
}

// TestVerifyRejectsNonCanonicalBase64 documents token malleability: a
// token whose signature (or payload) segment is re-spelled with the
// unused low bits of its last base64url character set decodes to the same
// bytes, so the signature still verifies, and Verify accepts a string the
// issuer never produced. RFC 7515 §2 / RFC 4648 §3.5 canonical encoding
// would refuse it. Severity is low (same claims, same jti, so revocation
// still applies), but anything keyed on the raw token string (a cache, a
// deny-list of token hashes, log correlation) sees up to 16 different
// spellings of one token. It failed before Verify checked canonical
// base64url (commit 46076a8).
func TestVerifyRejectsNonCanonicalBase64(t *testing.T) {
	ctx := context.Background()
	tk := newMemTokens(t, ctx, nil)
	valid, _, err := tk.Issue(ctx, "user/fuzz", roleProvider, "", "", "patients:read")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	for i, name := range []string{"header", "payload", "signature"} {
		p := append([]string(nil), parts...)
		p[i] = nonCanonical(p[i])
		if p[i] == parts[i] {
			continue // this segment's length leaves no unused bits
		}
		forged := strings.Join(p, ".")
		if _, err := tk.Verify(ctx, forged); err == nil {
			t.Errorf("Verify accepts the token with a non-canonical %s segment %q (issued %q)", name, p[i], parts[i])
		}
	}
}

// FuzzVerify feeds arbitrary strings to Tokens.Verify: it never panics,
// every refusal is a *TokenError (a 401, never a 503), and it accepts only
// tokens this test issued itself, byte for byte (no other base64url
// spelling of them either); a revoked one never.
func FuzzVerify(f *testing.F) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	tk := newMemTokens(f, ctx, clock)
	issued := map[string]bool{}
	issue := func(scope string) string {
		tok, _, err := tk.Issue(ctx, "user/fuzz", roleProvider, "", "", scope)
		if err != nil {
			f.Fatal(err)
		}
		return tok
	}
	valid := issue("patients:read")
	issued[valid] = true
	other := issue("system/*.cruds")
	issued[other] = true
	revoked := issue("patients:write")
	c, err := tk.Verify(ctx, revoked)
	if err != nil {
		f.Fatal(err)
	}
	if err := tk.Revoke(ctx, c.ID, c.Expiry.Time()); err != nil {
		f.Fatal(err)
	}

	parts := strings.Split(valid, ".")
	enc := base64.RawURLEncoding
	set, err := tk.Keys.JWKS(ctx)
	if err != nil {
		f.Fatal(err)
	}
	pkix, err := x509.MarshalPKIXPublicKey(set.Keys[0].Key.(*rsa.PublicKey))
	if err != nil {
		f.Fatal(err)
	}
	header := func(alg string) string {
		return enc.EncodeToString([]byte(`{"alg":"` + alg + `","kid":"` + set.Keys[0].KeyID + `","typ":"at+jwt"}`))
	}
	mac := hmac.New(sha256.New, pkix)
	mac.Write([]byte(header("HS256") + "." + parts[1]))
	payload, _ := enc.DecodeString(parts[1])
	tampered := strings.Replace(string(payload), "patients:read", "patients:wrt", 1)
	jsonForm, _ := json.Marshal(map[string]string{"protected": parts[0], "payload": parts[1], "signature": parts[2]})

	for _, s := range []string{
		valid,
		parts[0] + "." + parts[1] + "." + nonCanonical(parts[2]),
		nonCanonical(parts[0]) + "." + parts[1] + "." + parts[2],
		other,
		revoked,
		header("none") + "." + parts[1] + ".",
		header("none") + "." + parts[1] + "." + parts[2],
		header("HS256") + "." + parts[1] + "." + enc.EncodeToString(mac.Sum(nil)),
		parts[0] + "." + enc.EncodeToString([]byte(tampered)) + "." + parts[2],
		parts[0] + "." + parts[1],
		valid + ".",
		valid + " ",
		" " + valid,
		string(jsonForm),
		"",
		".",
		"..",
		"a.b.c",
		"not a token",
		"\x00\xff\xfe",
		strings.Repeat("A", MaxBytes+1),
		strings.Repeat("eyJ", 3000) + "." + strings.Repeat("x", 5000) + "." + "y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := tk.Verify(ctx, raw)
		if err != nil {
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("Verify(%q) failed with a non-token error %T: %v", raw, err, err)
			}
			if c != nil {
				t.Fatalf("Verify returned claims with an error")
			}
			return
		}
		if !issued[raw] {
			t.Fatalf("Verify accepted a token this test did not issue: %q (claims %+v)", raw, c)
		}
		if c == nil || c.Subject != "user/fuzz" || c.Issuer != "https://kiln.test" {
			t.Fatalf("accepted token with claims %+v", c)
		}
	})
}

// newMemTokens is the token service NewService assembles, over in-memory
// records and a fresh random master key, issuing for https://kiln.test;
// now may be nil (the clock).
func newMemTokens(tb testing.TB, ctx context.Context, now func() time.Time) *Tokens {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	records := authtest.NewRecords()
	keys := NewKeys(records, authtest.Keyring(tb), now)
	if err := keys.Ensure(ctx); err != nil {
		tb.Fatal(err)
	}
	return New(keys, records, "https://kiln.test", "https://kiln.test/fhir", now)
}
