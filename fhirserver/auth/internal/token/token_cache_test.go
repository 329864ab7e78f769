package token

import (
	"context"
	"strconv"
	"testing"
)

// TestVerifiedCacheBounded: the verified-token cache stays within its
// entry limit and, once full, drops the least recently used entries rather
// than all of them, so a busy server does not re-verify every client's
// token at once.
func TestVerifiedCacheBounded(t *testing.T) {
	ctx := context.Background()
	tk := newMemTokens(t, ctx, nil)
	kept, _, err := tk.Issue(ctx, "user/kept", roleProvider, "", "", "patients:read")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Verify(ctx, kept); err != nil {
		t.Fatal(err)
	}
	// Fill the cache with other clients' entries, the kept token in use
	// all along.
	for i := range maxVerifiedKept {
		tk.verified.Add("other-"+strconv.Itoa(i), verifiedToken{})
		if i%1000 == 0 {
			tk.verified.Get(kept)
		}
	}
	fresh, _, err := tk.Issue(ctx, "user/fresh", roleProvider, "", "", "patients:read")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Verify(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if n := tk.verified.Len(); n != maxVerifiedKept {
		t.Errorf("cache holds %d entries, want the limit %d", n, maxVerifiedKept)
	}
	if !tk.verified.Contains(kept) || !tk.verified.Contains(fresh) {
		t.Errorf("recently used tokens were dropped (kept %v, fresh %v)", tk.verified.Contains(kept), tk.verified.Contains(fresh))
	}
}
