package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// SetPassword replaces a user's password (argon2id, with the rules of
// Add). It changes nothing else of the account.
func (u *Users) SetPassword(ctx context.Context, email, password string) (*User, error) {
	if len([]rune(password)) < MinPasswordLength {
		return nil, fmt.Errorf("the password must have at least %d characters", MinPasswordLength)
	}
	user, err := u.Get(ctx, email)
	if err != nil {
		return nil, err
	}
	if user.Hash, err = HashPassword(password); err != nil {
		return nil, err
	}
	if err := u.put(ctx, user); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, errors.New("auth: the account changed during the reset; try again")
		}
		return nil, err
	}
	return user, nil
}

// ResetPassword sets a user's new password, then revokes every refresh
// token family of the user, so that a session opened before the reset
// (perhaps with a stolen password) cannot be continued. It returns the
// user (nil if the password was not changed) and the number of families
// revoked. Access tokens already issued are not tracked per user: they
// stay valid until they expire (TokenLifetime).
//
// The order matters: a login after the new hash is stored needs the new
// password, and a refresh in between continues a family that is revoked
// next.
func (s *Service) ResetPassword(ctx context.Context, email, password string) (*User, int, error) {
	user, err := s.Users.SetPassword(ctx, email, password)
	if err != nil {
		return nil, 0, err
	}
	n, err := s.revokeRefreshFamilies(ctx, user.Email)
	if err != nil {
		return user, n, fmt.Errorf("the password was changed, but the user's refresh tokens could not all be revoked: %w", err)
	}
	return user, n, nil
}

// revokeRefreshFamilies revokes the refresh token families of the account
// with that (normalized) email.
func (s *Service) revokeRefreshFamilies(ctx context.Context, email string) (int, error) {
	recs, err := s.records.ListRecords(ctx, refreshKind)
	if err != nil {
		return 0, err
	}
	families := map[string]bool{}
	for _, r := range recs {
		var rr refreshRecord
		if json.Unmarshal(r.Value, &rr) == nil && rr.Email == email {
			families[rr.Family] = true
		}
	}
	n := 0
	for f := range families {
		err := s.records.PutRecord(ctx, store.Record{Kind: familyKind, ID: f, Version: 1, Value: []byte{1}, Expires: s.now().Add(RefreshLifetime)})
		switch {
		case errors.Is(err, store.ErrConflict): // revoked already
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	return n, nil
}
