package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// SetPassword replaces a user's password (argon2id, with the rules of
// Add: ValidatePassword). It changes nothing else of the account.
func (u *Users) SetPassword(ctx context.Context, email, password string) (*User, error) {
	user, err := u.Get(ctx, email)
	if err != nil {
		return nil, err
	}
	if err := ValidatePassword(user.Email, password); err != nil {
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

// ResetPassword sets a user's new password, then ends the user's
// sessions (see endSessions), so that a session opened before the reset
// (perhaps with a stolen password) cannot be continued. It returns the
// user (nil if the password was not changed) and the number of refresh
// token families revoked.
//
// The order matters: a login after the new hash is stored needs the new
// password, and a refresh in between continues a family that is revoked
// next.
func (s *Service) ResetPassword(ctx context.Context, email, password string) (*User, int, error) {
	user, err := s.Users.SetPassword(ctx, email, password)
	if err != nil {
		return nil, 0, err
	}
	n, err := s.endSessions(ctx, user)
	if err != nil {
		return user, n, fmt.Errorf("the password was changed, but the user's sessions could not all be ended: %w", err)
	}
	return user, n, nil
}

// SetDisabled disables (or enables) a user account. Disabling also ends
// the user's sessions: tokens already issued are refused at once.
func (s *Service) SetDisabled(ctx context.Context, email string, disabled bool) (int, error) {
	if err := s.Users.SetDisabled(ctx, email, disabled); err != nil {
		return 0, err
	}
	if !disabled {
		return 0, nil
	}
	user, err := s.Users.Get(ctx, email)
	if err != nil {
		return 0, err
	}
	return s.endSessions(ctx, user)
}

// endSessions refuses every access token of user issued until now
// (Tokens.NotBefore) and revokes its refresh token families; it returns
// how many families.
func (s *Service) endSessions(ctx context.Context, user *User) (int, error) {
	if err := s.Tokens.NotBefore(ctx, "user/"+user.ID); err != nil {
		return 0, err
	}
	return s.revokeRefreshFamilies(ctx, user.Email)
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
		if err := s.endFamily(ctx, f); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
