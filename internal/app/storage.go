package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/indexversion"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// Storage says where the partitions live: on MongoDB when MongoURI is set
// (one database per partition, <MongoDatabase>_<partition>), else in the
// data folder (one SQLite file per partition, <partition>.db).
type Storage struct {
	DataDir                                    string
	MongoURI, MongoDatabase, MongoWriteConcern string
}

// The partitions' names on disk (DESIGN.md, "Partitions").
const (
	PartitionClinical  = "clinical"
	PartitionWorkforce = "workforce"
	PartitionAudit     = "audit"
)

// Store is what the server needs of a FHIR partition's store: the FHIR
// store, the reindex of its rows, the server's own records (users,
// keys…) and its sequences (PT-<n>).
type Store interface {
	store.Store
	store.Indexer
	store.Records
	store.Sequencer
}

// AuditLog is the audit partition as the server uses it.
type AuditLog interface {
	audit.Log
	Close() error
}

// Describe names the storage without the connection string, which may
// hold a password.
func (s Storage) Describe() string {
	if s.MongoURI != "" {
		return "MongoDB, databases " + s.MongoDatabase + "_* (write concern " + s.MongoWriteConcern + ")"
	}
	return "embedded SQLite, " + filepath.Join(s.DataDir, PartitionClinical+".db")
}

// openPartition opens a partition on whichever backend s names: the one
// place a partition's location is decided. what names it in errors.
func openPartition[T any](ctx context.Context, s Storage, partition, what string,
	onMongo func(context.Context, mongo.Config) (T, error), onSQLite func(context.Context, string) (T, error)) (T, error) {
	if s.MongoURI != "" {
		v, err := onMongo(ctx, mongo.Config{URI: s.MongoURI, Database: s.MongoDatabase + "_" + partition, WriteConcern: s.MongoWriteConcern})
		if err != nil {
			return v, fmt.Errorf("opening the MongoDB %s: %w", what, err)
		}
		return v, nil
	}
	v, err := onSQLite(ctx, filepath.Join(s.DataDir, partition+".db"))
	if err != nil {
		return v, fmt.Errorf("opening the %s: %w", what, err)
	}
	return v, nil
}

// OpenStore opens a FHIR partition's store. The data folder must exist.
// A new store (no resource yet) is marked as indexed by this version's
// string fold, so that it never needs a reindex for it.
func OpenStore(ctx context.Context, s Storage, partition string) (Store, error) {
	st, err := openStore(ctx, s, partition)
	if err != nil {
		return nil, err
	}
	return markNewIndex(ctx, st)
}

// openStore opens a partition's store as it is on disk.
func openStore(ctx context.Context, s Storage, partition string) (Store, error) {
	what := "store"
	if partition != PartitionClinical {
		what = partition + " store"
	}
	return openPartition(ctx, s, partition, what,
		func(ctx context.Context, c mongo.Config) (Store, error) { return mongo.Open(ctx, c) },
		func(ctx context.Context, path string) (Store, error) { return sqlite.Open(ctx, path) })
}

// markNewIndex marks a store with no resource yet as indexed by this
// version's string fold (indexversion.MarkNew); it closes st on error.
func markNewIndex(ctx context.Context, st Store) (Store, error) {
	if err := indexversion.MarkNew(ctx, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// OpenAuditLog opens the audit partition, an append-only log: the table
// audit_log of its own database file, or the collection audit_log of its
// own MongoDB database.
func OpenAuditLog(ctx context.Context, s Storage) (AuditLog, error) {
	return openPartition(ctx, s, PartitionAudit, "audit log",
		func(ctx context.Context, c mongo.Config) (AuditLog, error) { return mongo.OpenLog(ctx, c) },
		func(ctx context.Context, path string) (AuditLog, error) { return sqlite.OpenLog(ctx, path) })
}

// LoadCursorKey reads the key that seals search page cursors, creating
// it once: cursors then survive a restart.
func LoadCursorKey(dir string, st store.Store) ([]byte, error) {
	return loadSecret(dir, st, "cursor-key", "cursor.key", "the cursor key")
}

// AuditQueryKeyFile is the audit query key's file in the data folder.
const AuditQueryKeyFile = "audit-query.key"

// LoadAuditQueryKey reads the key of the tags that stand for the values
// of recorded queries (audit.KeyedQuery), creating it at the first start.
// It must outlive the audit records it keyed: without it their tags can
// no longer be confirmed (docs/erasure.md).
func LoadAuditQueryKey(dir string, st store.Store) ([]byte, error) {
	return loadSecret(dir, st, "audit-query-key", AuditQueryKeyFile, "the audit query key")
}

// loadSecret reads a 32-byte secret of the server, creating it once:
// from the MongoDB store when there is one (instances sharing it share
// the secret, so that any of them accepts the page links of another and
// keys audit tags alike), else from file in the data folder, mode 0600.
func loadSecret(dir string, st store.Store, name, file, what string) ([]byte, error) {
	if shared, ok := st.(store.SecretKeeper); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return shared.Secret(ctx, name, secretSize)
	}
	path := filepath.Join(dir, file)
	key, err := os.ReadFile(path)
	switch {
	case err == nil && len(key) == secretSize:
		// A secret others can read is refused, as the master key is.
		if err := crypt.CheckPrivate(path, what); err != nil {
			return nil, err
		}
		return key, nil
	case err == nil:
		// Replacing a damaged secret would silently orphan what it keyed
		// (open page links; audit tags that could no longer be confirmed):
		// the operator decides.
		return nil, fmt.Errorf("%s %s holds %d bytes, not %d: restore it from a backup, or remove it to start a new one (what it keyed can then no longer be checked)", what, path, len(key), secretSize)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	key = make([]byte, secretSize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("creating %s: %w", what, err)
	}
	// O_EXCL: two servers starting on one folder cannot each write their own.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", what, err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", what, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", what, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", what, err)
	}
	return key, nil
}

// secretSize is the length of the server's random secrets.
const secretSize = 32
