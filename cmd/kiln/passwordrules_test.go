package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The password rules reach every command that sets a password: `kiln admin
// user add` and `kiln admin user password` refuse a weak password with the
// rule it broke, without echoing it, and change nothing.
func TestAdminUserPasswordRules(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	const email = "nurse.joy@example.org"
	var out bytes.Buffer
	if err := run(ctx, []string{"admin", "user", "add", "--data", data, "--email", email, "--role", "provider",
		"--scopes", "patients:read", "--password-stdin"}, strings.NewReader("correct horse battery staple\n"), &out, &out); err != nil {
		t.Fatalf("user add: %v\n%s", err, out.String())
	}
	// The rules come before the check that the account exists (add) or
	// not (password): each refusal below is for the password.
	for _, tc := range []struct{ password, says string }{
		{"aaaaaaaaaaaa", "one character repeated"},
		{"password1234", "common and breached passwords"},
		{"123456789012", "common and breached passwords"},
		{email, "e-mail address"},
		{"i am Nurse.Joy on call", "e-mail address"},
	} {
		for _, sub := range [][]string{
			{"add", "--role", "provider", "--scopes", "patients:read"},
			{"password"},
		} {
			out.Reset()
			args := append([]string{"admin", "user", sub[0], "--data", data, "--email", email, "--password-stdin"}, sub[1:]...)
			err := run(ctx, args, strings.NewReader(tc.password+"\n"), &out, &out)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("user %s with %q: %v, want an error saying %q", sub[0], tc.password, err, tc.says)
				continue
			}
			if msg := strings.ToLower(err.Error() + out.String()); strings.Contains(msg, strings.ToLower(tc.password)) {
				t.Errorf("user %s: the refusal holds the password: %v\n%s", sub[0], err, out.String())
			}
		}
	}
	a, _ := openTestApp(t, "--data", data)
	if _, err := a.Auth.Users.Authenticate(ctx, email, "correct horse battery staple"); err != nil {
		t.Fatalf("a refused reset changed the password: %v", err)
	}
}

// A KILN_ADMIN_PASSWORD that breaks a rule fails `kiln serve` before it
// listens, saying which variable and which rule, without the password;
// the generated first-admin password passes the rules whatever the e-mail.
func TestFirstAdminPasswordRules(t *testing.T) {
	for _, tc := range []struct{ password, says string }{
		{"password1234", "common and breached passwords"},
		{"aaaaaaaaaaaa", "one character repeated"},
		{"root.admin is me", "e-mail address"},
		{"short", "at least 12 characters"},
	} {
		t.Run(tc.password, func(t *testing.T) {
			t.Setenv("KILN_ADMIN_EMAIL", "root.admin@example.org")
			t.Setenv("KILN_ADMIN_PASSWORD", tc.password)
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel() // should serve start after all, it stops then
			err := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--log-level", "warn"}, nil, &out, &out)
			if err == nil || !strings.Contains(err.Error(), "KILN_ADMIN_PASSWORD is refused") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("serve: %v, want KILN_ADMIN_PASSWORD refused saying %q\n%s", err, tc.says, out.String())
			}
			if strings.Contains(strings.ToLower(err.Error()+out.String()), strings.ToLower(tc.password)) {
				t.Errorf("the refusal holds the password: %v\n%s", err, out.String())
			}
		})
	}
	// "bob" is in about one random password of 1,500: the generated one
	// is drawn again until it passes.
	for range 10000 { // without the redraw, fails with odds 1 - (1 - 1/1500)^10000 > 99.8 %
		p, err := randomAdminPassword("bob@example.org")
		if err != nil || strings.Contains(strings.ToLower(p), "bob") {
			t.Fatalf("a generated password %q: %v", p, err)
		}
	}
}
