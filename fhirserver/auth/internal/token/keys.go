package token

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Sealer encrypts values at rest (crypt.Keyring).
type Sealer interface {
	Seal(plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

const keyKind = "signing-key"

// keyRecord is a signing key as stored: the private key sealed.
type keyRecord struct {
	KID     string    `json:"kid"`
	Sealed  []byte    `json:"sealed"` // PKCS#8 DER, sealed with aad "signing-key:<kid>"
	Created time.Time `json:"created"`
	// Signs is when the key starts signing; until then it is only
	// published, so that verifiers that cache the JWKS know it first.
	Signs time.Time `json:"signs"`
	// Retired is when a newer key took over (zero: not yet). The key stays
	// published until Retired + the token lifetime: its last token expires.
	Retired time.Time `json:"retired,omitzero"`
}

type signingKey struct {
	keyRecord
	priv *rsa.PrivateKey
}

// Keys are the issuer's RS256 signing keys, kept in the store's records,
// sealed at rest. Rotation publishes a new key Lead before it signs; the
// old one is published until its last token expires.
type Keys struct {
	records store.Records
	sealer  Sealer
	now     func() time.Time
	// Lead: how long a new key is published before it signs. MaxAge: a
	// key older than this is rotated automatically. TokenTTL: how long a
	// retired key keeps verifying.
	Lead, MaxAge, TokenTTL time.Duration

	mu     sync.Mutex
	cached []*signingKey
	loaded time.Time
}

// NewKeys returns the key set; Ensure creates the first key.
func NewKeys(records store.Records, sealer Sealer, now func() time.Time) *Keys {
	return &Keys{records: records, sealer: sealer, now: now, Lead: 10 * time.Minute, MaxAge: 90 * 24 * time.Hour, TokenTTL: Lifetime}
}

// reloadEvery bounds how stale one instance's view of the keys is when
// another instance rotated them.
const reloadEvery = time.Minute

func (k *Keys) load(ctx context.Context, force bool) ([]*signingKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !force && k.cached != nil && k.now().Sub(k.loaded) < reloadEvery {
		return k.cached, nil
	}
	recs, err := k.records.ListRecords(ctx, keyKind)
	if err != nil {
		return nil, fmt.Errorf("auth: load signing keys: %w", err)
	}
	var keys []*signingKey
	for _, r := range recs {
		var kr keyRecord
		if err := json.Unmarshal(r.Value, &kr); err != nil {
			return nil, fmt.Errorf("auth: signing key %s: %w", r.ID, err)
		}
		der, err := k.sealer.Open(kr.Sealed, []byte(keyKind+":"+kr.KID))
		if err != nil {
			return nil, fmt.Errorf("auth: unseal signing key %s: %w", kr.KID, err)
		}
		pk, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, fmt.Errorf("auth: signing key %s: %w", kr.KID, err)
		}
		rk, ok := pk.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("auth: signing key %s is not RSA", kr.KID)
		}
		keys = append(keys, &signingKey{kr, rk})
	}
	slices.SortFunc(keys, func(a, b *signingKey) int { return a.Signs.Compare(b.Signs) })
	k.cached, k.loaded = keys, k.now()
	return keys, nil
}

// Ensure creates the first key (signing at once: nobody can have cached a
// JWKS yet) when there is none, and rotates a key older than MaxAge.
func (k *Keys) Ensure(ctx context.Context) error {
	keys, err := k.load(ctx, true)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return k.add(ctx, k.now())
	}
	newest := keys[len(keys)-1]
	if k.now().Sub(newest.Created) >= k.MaxAge {
		return k.Rotate(ctx)
	}
	return k.prune(ctx, keys)
}

// Rotate adds a key that starts signing Lead from now; the current one
// signs until then.
func (k *Keys) Rotate(ctx context.Context) error {
	return k.add(ctx, k.now().Add(k.Lead))
}

func (k *Keys) add(ctx context.Context, signs time.Time) error {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("auth: generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("auth: encode signing key: %w", err)
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	kr := keyRecord{KID: hex.EncodeToString(id), Created: k.now(), Signs: signs}
	if kr.Sealed, err = k.sealer.Seal(der, []byte(keyKind+":"+kr.KID)); err != nil {
		return fmt.Errorf("auth: seal signing key: %w", err)
	}
	v, err := json.Marshal(kr)
	if err != nil {
		return err
	}
	if err := k.records.PutRecord(ctx, store.Record{Kind: keyKind, ID: kr.KID, Version: 1, Value: v}); err != nil {
		return fmt.Errorf("auth: store signing key: %w", err)
	}
	_, err = k.load(ctx, true)
	return err
}

// prune deletes keys no token can still need: superseded before the last
// token lifetime.
func (k *Keys) prune(ctx context.Context, keys []*signingKey) error {
	now := k.now()
	for i, key := range keys[:len(keys)-1] {
		next := keys[i+1]
		if now.After(next.Signs.Add(k.TokenTTL + time.Minute)) {
			if err := k.records.DeleteRecord(ctx, keyKind, key.KID); err != nil {
				return fmt.Errorf("auth: prune signing key: %w", err)
			}
		}
	}
	return nil
}

// signer is the key that signs now: the newest whose Signs has passed.
func (k *Keys) signer(ctx context.Context) (*signingKey, error) {
	keys, err := k.load(ctx, false)
	if err != nil {
		return nil, err
	}
	now := k.now()
	for i := len(keys) - 1; i >= 0; i-- {
		if !keys[i].Signs.After(now) {
			return keys[i], nil
		}
	}
	return nil, errors.New("auth: no signing key is active")
}

// published are the keys of the JWKS: all but those whose successor took
// over more than a token lifetime ago.
func (k *Keys) published(ctx context.Context) ([]*signingKey, error) {
	keys, err := k.load(ctx, false)
	if err != nil {
		return nil, err
	}
	now := k.now()
	var out []*signingKey
	for i, key := range keys {
		if i+1 < len(keys) && now.After(keys[i+1].Signs.Add(k.TokenTTL)) {
			continue
		}
		out = append(out, key)
	}
	return out, nil
}

// JWKS is the public key set (RFC 7517) for /.well-known/jwks.json.
func (k *Keys) JWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	keys, err := k.published(ctx)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	var set jose.JSONWebKeySet
	for _, key := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &key.priv.PublicKey, KeyID: key.KID, Algorithm: string(jose.RS256), Use: "sig"})
	}
	return set, nil
}

// verificationKey is the public key of kid, if it is published.
func (k *Keys) verificationKey(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	for attempt := range 2 {
		keys, err := k.published(ctx)
		if err != nil {
			return nil, err
		}
		for _, key := range keys {
			if key.KID == kid {
				return &key.priv.PublicKey, nil
			}
		}
		// A key another instance rotated in: reload, but not on every
		// unknown kid an attacker sends.
		k.mu.Lock()
		stale := k.now().Sub(k.loaded) > unknownKidReload
		k.mu.Unlock()
		if attempt > 0 || !stale {
			break
		}
		if _, err := k.load(ctx, true); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

const unknownKidReload = 10 * time.Second
