package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/token"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Roles of users.
const (
	RoleAdmin            = "admin"
	RoleProvider         = "provider"
	RoleWorkforceOfficer = "workforce_officer"
	RolePrivacyOfficer   = "privacy_officer"
)

// Roles lists the known roles.
var Roles = []string{RoleAdmin, RoleProvider, RoleWorkforceOfficer, RolePrivacyOfficer}

const userKind = "user"

// User is a person who logs in with an email address and a password.
type User struct {
	ID       string    `json:"id"` // the token's sub, stable; never the email
	Email    string    `json:"email"`
	Role     string    `json:"role"`
	Scopes   string    `json:"scopes"` // the most a token of this user may carry
	FHIRUser string    `json:"fhirUser,omitempty"`
	Disabled bool      `json:"disabled,omitempty"`
	Hash     string    `json:"hash"` // argon2id, PHC string format
	Created  time.Time `json:"created"`

	version int64
}

// argon2id parameters: OWASP's first recommendation (19 MiB, 2 passes,
// one lane).
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// HashPassword returns the argon2id PHC string of password, in its NFKC
// form (NormalizePassword).
func HashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	sum := argon2.IDKey([]byte(NormalizePassword(password)), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(sum)), nil
}

// CheckPassword reports whether password matches the PHC string, in time
// independent of where they differ. It checks the password's NFKC form
// (NormalizePassword), as HashPassword hashes it. Hashes stored before
// passwords were normalised hold the password as typed: when the NFKC form
// does not match and differs from the typed one, the typed one is checked
// too, so those users are not locked out (they keep logging in with the
// spelling they chose; a reset stores the normalised form). That second
// hash depends only on the password given, not on the account.
func CheckPassword(phc, password string) bool {
	nfkc := NormalizePassword(password)
	if checkHash(phc, nfkc) {
		return true
	}
	return nfkc != password && checkHash(phc, password)
}

// checkHash reports whether password, as given, matches the PHC string.
func checkHash(phc, password string) bool {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var v int
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || m > 1<<21 || t == 0 || t > 16 || p == 0 {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is checked against when the email is unknown, so that an
// unknown email costs the same time as a wrong password.
var dummyHash = func() string {
	h, err := HashPassword("kiln-dummy-password")
	if err != nil {
		panic(err)
	}
	return h
}()

// Users are the user accounts, kept in the store's records by normalized
// email.
type Users struct {
	records store.Records
	now     func() time.Time
}

// NewUsers returns the user accounts of records.
func NewUsers(records store.Records, now func() time.Time) *Users {
	return &Users{records: records, now: now}
}

// NormalizeEmail validates an address and returns its lookup form.
func NormalizeEmail(email string) (string, error) {
	a, err := mail.ParseAddress(strings.TrimSpace(email))
	if err != nil || a.Name != "" || !strings.Contains(a.Address, "@") {
		return "", fmt.Errorf("%q is not an email address", email)
	}
	return strings.ToLower(a.Address), nil
}

// ErrExists: a user with that email exists already.
var ErrExists = errors.New("auth: a user with that email exists")

// Add creates a user. scopes must parse completely; the password must
// pass ValidatePassword (a *PasswordError otherwise).
func (u *Users) Add(ctx context.Context, email, role, scopes, fhirUser, password string) (*User, error) {
	norm, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(Roles, role) {
		return nil, fmt.Errorf("unknown role %q (one of %s)", role, strings.Join(Roles, ", "))
	}
	g, rejected := ParseScopes(scopes)
	if len(rejected) > 0 {
		return nil, fmt.Errorf("unknown scopes: %s", strings.Join(rejected, " "))
	}
	if err := ValidatePassword(norm, password); err != nil {
		return nil, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	user := &User{ID: token.RandomID()[:16], Email: norm, Role: role, Scopes: g.String(), FHIRUser: fhirUser, Hash: hash, Created: u.now().UTC()}
	if err := u.put(ctx, user); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, ErrExists
		}
		return nil, err
	}
	return user, nil
}

func (u *Users) put(ctx context.Context, user *User) error {
	v, err := json.Marshal(user)
	if err != nil {
		return err
	}
	if err := u.records.PutRecord(ctx, store.Record{Kind: userKind, ID: user.Email, Version: user.version + 1, Value: v}); err != nil {
		return err
	}
	user.version++
	return nil
}

// Get returns the user with that email (store.ErrNotFound if none).
func (u *Users) Get(ctx context.Context, email string) (*User, error) {
	norm, err := NormalizeEmail(email)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", store.ErrNotFound)
	}
	r, err := u.records.GetRecord(ctx, userKind, norm)
	if err != nil {
		return nil, err
	}
	var user User
	if err := json.Unmarshal(r.Value, &user); err != nil {
		return nil, fmt.Errorf("auth: user record %s: %w", r.ID, err)
	}
	user.version = r.Version
	return &user, nil
}

// List returns every user, by email.
func (u *Users) List(ctx context.Context) ([]*User, error) {
	recs, err := u.records.ListRecords(ctx, userKind)
	if err != nil {
		return nil, err
	}
	out := make([]*User, 0, len(recs))
	for _, r := range recs {
		var user User
		if err := json.Unmarshal(r.Value, &user); err != nil {
			return nil, fmt.Errorf("auth: user record %s: %w", r.ID, err)
		}
		user.version = r.Version
		out = append(out, &user)
	}
	return out, nil
}

// SetDisabled disables (or re-enables) a user; a disabled user cannot log
// in or refresh tokens.
func (u *Users) SetDisabled(ctx context.Context, email string, disabled bool) error {
	user, err := u.Get(ctx, email)
	if err != nil {
		return err
	}
	user.Disabled = disabled
	return u.put(ctx, user)
}

// Authenticate returns the user whose email and password match, or
// ErrBadCredentials. It costs one argon2id hash whether or not the email
// is known, and gives the same error for an unknown email, a wrong
// password and a disabled account.
func (u *Users) Authenticate(ctx context.Context, email, password string) (*User, error) {
	user, err := u.Get(ctx, email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	hash := dummyHash
	if user != nil {
		hash = user.Hash
	}
	ok := CheckPassword(hash, password)
	if user == nil || !ok || user.Disabled {
		return nil, ErrBadCredentials
	}
	return user, nil
}

// ErrBadCredentials is every failed login, whatever the reason.
var ErrBadCredentials = errors.New("invalid email or password")
