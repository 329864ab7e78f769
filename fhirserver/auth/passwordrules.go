package auth

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

//go:generate bash commonpasswords/gen.sh

// The password rules (OWASP ASVS 5 V6, level 2). ValidatePassword holds
// them all, and every path that sets a password (Users.Add,
// Users.SetPassword, so the first admin and the admin commands too) goes
// through it.

// MinPasswordLength is the shortest password accepted (NIST SP 800-63B),
// in characters after NFKC normalisation.
const MinPasswordLength = 12

// Rules a password can break: PasswordError.Rule.
const (
	RuleMinLength   = "min-length"
	RuleRepeated    = "repeated-character"
	RuleEmail       = "contains-email"
	RuleCommon      = "common-password"
	minLocalPartLen = 3 // shorter local parts ("al") are in too many passwords to refuse them
)

// PasswordError is a password refused by a rule. Its message names the
// rule and never holds the password.
type PasswordError struct {
	Rule    string // one of the Rule constants
	Message string
}

func (e *PasswordError) Error() string { return e.Message }

// NormalizePassword returns the form of a password that is hashed and
// checked: NFKC, so that the composed and decomposed spellings of "Å" (and
// full-width and other compatibility forms) are the same password.
func NormalizePassword(password string) string {
	return norm.NFKC.String(password)
}

// ValidatePassword returns a *PasswordError when password may not be the
// password of the account with that email. The rules, in this order:
//   - at least MinPasswordLength characters;
//   - not one character repeated;
//   - not containing the e-mail address, nor its local part when that has
//     at least 3 characters (case-insensitively);
//   - not on the embedded list of common and breached passwords
//     (commonpasswords/passwords.txt). The match is exact after NFKC and
//     case folding: "Password1234" is refused, "password1234!" is not.
//     Looser matching (stripping digits or symbols, leet speak) would
//     refuse good passphrases that merely start with a common word, and
//     the length rule already keeps what is left out of a quick guess.
func ValidatePassword(email, password string) error {
	p := NormalizePassword(password)
	n := utf8.RuneCountInString(p)
	if n < MinPasswordLength {
		return &PasswordError{RuleMinLength, fmt.Sprintf("the password must have at least %d characters", MinPasswordLength)}
	}
	if first, _ := utf8.DecodeRuneInString(p); strings.Count(p, string(first)) == n {
		return &PasswordError{RuleRepeated, "the password must not be one character repeated"}
	}
	fold := cases.Fold() // a Caser keeps state: one per call
	fp := fold.String(p)
	if e := fold.String(NormalizePassword(strings.TrimSpace(email))); e != "" {
		local := e
		if at := strings.LastIndexByte(e, '@'); at >= 0 {
			local = e[:at]
		}
		if strings.Contains(fp, e) || (utf8.RuneCountInString(local) >= minLocalPartLen && strings.Contains(fp, local)) {
			return &PasswordError{RuleEmail, "the password must not contain the account's e-mail address or the part before the @"}
		}
	}
	if _, found := slices.BinarySearch(commonPasswords(), fp); found {
		return &PasswordError{RuleCommon, "the password is on the list of common and breached passwords"}
	}
	return nil
}

//go:embed commonpasswords/passwords.txt
var commonPasswordsFile []byte

// commonPasswords is the sorted list in commonpasswords/passwords.txt,
// parsed on first use rather than at start.
var commonPasswords = sync.OnceValue(func() []string {
	list, _ := parseCommonPasswords(commonPasswordsFile)
	return list
})

// parseCommonPasswords reads the list file: "# key: value" header lines up
// to a blank line, then one entry a line, sorted. It returns the entries
// and the header's min-length (0 if absent).
func parseCommonPasswords(b []byte) (list []string, minLength int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	header := true
	for sc.Scan() {
		line := sc.Text()
		switch {
		case header && line == "":
			header = false
		case header:
			if v, ok := strings.CutPrefix(line, "# min-length: "); ok {
				minLength, _ = strconv.Atoi(v)
			}
		default:
			list = append(list, line)
		}
	}
	return list, minLength
}
