package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestAdminUserUnknownEmail: kiln admin user password, disable and enable
// on an e-mail with no account say so in the account's words, not the
// store's ("get record user/…: store: not found"), and change nothing.
func TestAdminUserUnknownEmail(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"admin", "user", "add", "--data", data, "--email", "nurse@example.org", "--role", "provider",
		"--scopes", "patients:read", "--password-stdin"}, strings.NewReader("the first long password\n"), &out, &out); err != nil {
		t.Fatalf("user add: %v\n%s", err, out.String())
	}
	for _, sub := range [][]string{{"password", "--password-stdin"}, {"disable"}, {"enable"}} {
		for _, email := range []string{"nobody@example.org", "not an e-mail"} {
			out.Reset()
			args := append([]string{"admin", "user", sub[0], "--data", data, "--email", email}, sub[1:]...)
			err := run(ctx, args, strings.NewReader("a new long password\n"), &out, &out)
			if err == nil {
				t.Errorf("%s %q: no error", sub[0], email)
				continue
			}
			if want := `no user with e-mail "` + email + `"`; err.Error() != want {
				t.Errorf("%s %q: %q, want %q", sub[0], email, err, want)
			}
		}
	}
	// The existing account is as it was: active, its password unchanged.
	a, _ := openTestApp(t, "--data", data)
	u, err := a.Auth.Users.Authenticate(ctx, "nurse@example.org", "the first long password")
	if err != nil || u.Disabled {
		t.Fatalf("the account after the refused commands: %v %+v", err, u)
	}
}
