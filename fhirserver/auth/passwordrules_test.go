package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/authtest"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// ångström is one password in its two canonically equivalent spellings:
// "Å" and "ö" precomposed (NFC) and as a letter plus combining mark (NFD).
var (
	ångströmNFC = norm.NFC.String("Ångström-kettle-lid-42")
	ångströmNFD = norm.NFD.String("Ångström-kettle-lid-42")
)

// The rules of ValidatePassword, each refusing with its rule and a message
// that says which rule, and the passwords they let through.
func TestValidatePassword(t *testing.T) {
	const email = "alice.smith@example.org"
	for _, tc := range []struct {
		name, email, password string
		rule                  string // "" when accepted
	}{
		{"too short", email, "short", RuleMinLength},
		{"12 characters only in NFD (11 after NFKC)", email, norm.NFD.String("ééééééééééé"), RuleMinLength},
		{"one character repeated", email, "aaaaaaaaaaaa", RuleRepeated},
		{"one accented character repeated, spelt decomposed", email, norm.NFD.String("éééééééééééé"), RuleRepeated},
		{"common: password1234", email, "password1234", RuleCommon},
		{"common: 123456789012", email, "123456789012", RuleCommon},
		{"common, in capitals", email, "PassWord1234", RuleCommon},
		{"common, in full-width letters (NFKC)", email, "ｐａｓｓｗｏｒｄ１２３４", RuleCommon},
		{"common, another list entry", email, "qwerty123456", RuleCommon},
		{"the e-mail itself", email, email, RuleEmail},
		{"the e-mail in capitals", email, "ALICE.SMITH@EXAMPLE.ORG", RuleEmail},
		{"the e-mail inside", email, "my login is alice.smith@example.org!", RuleEmail},
		{"the local part embedded", email, "xx-Alice.Smith-2024!", RuleEmail},
		{"a two-letter local part is ignored", "al@example.org", "a calm alpine lake", ""},
		{"a two-letter local part's full e-mail is not", "al@example.org", "say al@example.org", RuleEmail},
		{"a good passphrase", email, "correct horse battery staple", ""},
		{"a common password with more after it (exact match only)", email, "password1234!", ""},
		{"the NFC spelling of a good password", email, ångströmNFC, ""},
		{"the NFD spelling", email, ångströmNFD, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePassword(tc.email, tc.password)
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *PasswordError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a *PasswordError of rule %s", err, tc.rule)
			}
			if pe.Rule != tc.rule {
				t.Errorf("rule %s (%q), want %s", pe.Rule, pe.Message, tc.rule)
			}
			// The message names the rule in words…
			words := map[string]string{RuleMinLength: "at least 12 characters", RuleRepeated: "one character repeated",
				RuleEmail: "e-mail address", RuleCommon: "common and breached passwords"}[tc.rule]
			if !strings.Contains(err.Error(), words) {
				t.Errorf("the message %q does not say %q", err, words)
			}
			// …and never holds the password, in any spelling.
			low := strings.ToLower(err.Error())
			for _, p := range []string{tc.password, NormalizePassword(tc.password), cases.Fold().String(NormalizePassword(tc.password))} {
				if strings.Contains(low, strings.ToLower(p)) {
					t.Errorf("the message %q holds the password", err)
				}
			}
		})
	}
}

// Every way of setting a password goes through the rules: creating a user
// and replacing the password.
func TestPasswordRulesOnAddAndSetPassword(t *testing.T) {
	ctx := context.Background()
	u := NewUsers(authtest.NewRecords(), time.Now)
	const email = "nurse.joy@example.org"
	for _, bad := range []string{"aaaaaaaaaaaa", "password1234", "123456789012", email, "i am nurse.joy here"} {
		var pe *PasswordError
		if _, err := u.Add(ctx, email, RoleProvider, "patients:read", "", bad); !errors.As(err, &pe) {
			t.Errorf("Add with %q: %v, want a *PasswordError", bad, err)
		}
	}
	if _, err := u.Get(ctx, email); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused Add created the user: %v", err)
	}
	if _, err := u.Add(ctx, email, RoleProvider, "patients:read", "", "correct horse battery staple"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"aaaaaaaaaaaa", "password1234", "123456789012", email, "i am nurse.joy here"} {
		var pe *PasswordError
		if _, err := u.SetPassword(ctx, email, bad); !errors.As(err, &pe) {
			t.Errorf("SetPassword with %q: %v, want a *PasswordError", bad, err)
		}
	}
	if _, err := u.Authenticate(ctx, email, "correct horse battery staple"); err != nil {
		t.Fatalf("a refused SetPassword changed the password: %v", err)
	}
}

// A password set in one Unicode spelling logs in with the other, whichever
// was used to set it; a password hashed before normalisation (as typed, in
// NFD) still logs in with that spelling.
func TestPasswordNormalizationLogin(t *testing.T) {
	if ångströmNFC == ångströmNFD {
		t.Fatal("the two spellings are the same bytes: the test proves nothing")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		set, login string
	}{
		{"set NFC, log in NFD", ångströmNFC, ångströmNFD},
		{"set NFD, log in NFC", ångströmNFD, ångströmNFC},
		{"set NFC, log in NFC", ångströmNFC, ångströmNFC},
		{"set NFD, log in NFD", ångströmNFD, ångströmNFD},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := NewUsers(authtest.NewRecords(), time.Now)
			if _, err := u.Add(ctx, "ada@example.org", RoleProvider, "patients:read", "", tc.set); err != nil {
				t.Fatal(err)
			}
			if _, err := u.Authenticate(ctx, "ada@example.org", tc.login); err != nil {
				t.Errorf("Add then log in: %v", err)
			}
			if _, err := u.SetPassword(ctx, "ada@example.org", tc.set); err != nil {
				t.Fatal(err)
			}
			if _, err := u.Authenticate(ctx, "ada@example.org", tc.login); err != nil {
				t.Errorf("SetPassword then log in: %v", err)
			}
			if _, err := u.Authenticate(ctx, "ada@example.org", ångströmNFC+"x"); !errors.Is(err, ErrBadCredentials) {
				t.Errorf("a wrong password: %v", err)
			}
		})
	}
	t.Run("a hash from before normalisation", func(t *testing.T) {
		legacy := rawHash(t, ångströmNFD)
		if !CheckPassword(legacy, ångströmNFD) {
			t.Error("the password as it was typed is refused: its user is locked out")
		}
		if CheckPassword(legacy, "Angstrom-kettle-lid-42") {
			t.Error("another password matches")
		}
	})
}

// rawHash is the argon2id PHC string of password as given, as HashPassword
// made it before passwords were normalised.
func rawHash(t *testing.T, password string) string {
	t.Helper()
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		t.Fatal(err)
	}
	sum := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// The embedded list is what ValidatePassword's binary search needs (sorted,
// unique, in the compared form), was generated for this MinPasswordLength
// (shorter entries were dropped because the length rule refuses them), and
// its header's count is its length.
func TestCommonPasswordsFile(t *testing.T) {
	list, minLength := parseCommonPasswords(commonPasswordsFile)
	if minLength != MinPasswordLength {
		t.Errorf("the list was generated for passwords of at least %d characters, the rule is %d: run go generate ./fhirserver/auth", minLength, MinPasswordLength)
	}
	if len(list) < 100 {
		t.Fatalf("the list has %d entries", len(list))
	}
	if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
		t.Error("the list is not sorted and unique")
	}
	for _, e := range list {
		if got := cases.Fold().String(NormalizePassword(e)); got != e || len([]rune(e)) < MinPasswordLength {
			t.Errorf("entry %q: not in the compared form (%q) or too short", e, got)
		}
	}
	var count int
	for line := range strings.Lines(string(commonPasswordsFile)) {
		if v, ok := strings.CutPrefix(line, "# entries: "); ok {
			count, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	if count != len(list) {
		t.Errorf("the header says %d entries, the list has %d", count, len(list))
	}
}

// The cost of the embedded list: parsing it (done once, on the first
// password checked) and one check.
func BenchmarkCommonPasswordsParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		list, _ := parseCommonPasswords(commonPasswordsFile)
		if len(list) == 0 {
			b.Fatal("empty")
		}
	}
}

func BenchmarkValidatePassword(b *testing.B) {
	b.ReportAllocs()
	commonPasswords()
	for b.Loop() {
		if err := ValidatePassword("alice.smith@example.org", "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}
