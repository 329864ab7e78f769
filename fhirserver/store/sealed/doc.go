// Package sealed is the encrypted partition's store: a wrapper around any
// store.Store that keeps nothing readable of the resources it stores
// (DESIGN.md, "Partitions"; docs/format/sealed-value.md and
// docs/format/blind-index.md hold the formats).
//
// # Bodies and records
//
// Every version's body is sealed with fhirserver/crypt (AES-256-GCM
// envelope encryption; the value carries its master key id, so
// crypt.Keyring.Rewrap can move it to a new key while the store serves).
// Its additional data binds it to its place, so a sealed body copied to
// another resource, version or partition does not open:
//
//	part("resource") part(partition) part(type) part(id) uint64be(version)
//
// where part(s) is the length of s as a 4-byte big-endian integer, then
// the bytes of s. Record values (store.Records) are sealed the same way
// with part("record") part(partition) part(kind) part(id)
// uint64be(record version): the idempotency records hold answers, and
// answers hold personal data. Reads, history, search matches and
// includes are opened on the way out; a value that does not open is an
// error, never returned as it is. Counters (store.Sequencer) and the
// server's secrets (store.SecretKeeper) pass through: they hold names
// and numbers, and random keys as every partition does.
//
// # Index rows: a blind index
//
// Index keys "param\x1fvalue" become "param\x1f~k~tag", tag being the
// first 16 bytes, in unpadded base64url, of HMAC-SHA256 under the blind
// key k (BlindKeys, never a key of the data-key ring) of
// "kiln/sealed blind-index v1\x00" followed by the whole plain key. A
// query's equality keys (tokens, identifiers, :of-type, :in, :not,
// strings with :exact, uri, references, _id, composites) are tagged the
// same way under every key of the ring, so equality search works while
// a rebuild under a new key is under way; TagKeyID tells a row's key.
//
// One kind of key stays plain: a literal reference "param\x1fType/id"
// (search.RefKey) whose id is opaque (Config.OpaqueID; by default a
// UUID, the ids the FHIR service assigns). It holds a resource type and
// a random id, which the store keeps in plain anyway as the referenced
// resource's own key, and it is what _include, _revinclude, chains,
// _has and compartments follow inside the backend. A reference to any
// other id (Patient/EMP-1, an absolute URL, a versioned reference) is
// blinded like the rest: found by equality, not followed.
//
// Resource types, ids, version numbers and timestamps are stored in
// plain, as every store keys versions by them. With Config.OnlyOpaqueIDs
// a Put under an id that is not opaque is refused (400), so an id a
// client chose (an update creating Patient/EMP-1) never reaches the disk.
//
// Date and number rows and sort values would reveal the values, so only
// the date rows of _lastUpdated are kept (the version's own timestamp,
// which the store keeps in plain), and sort rows keep the parameter but
// no value: :missing reads their presence.
//
// # Keys that change: rotation
//
// The store's rings are fixed (Config.Keyring and Config.Blind) or come
// from Config.Keys, which the caller loads (from the partition's keys
// record) and which change while the store serves: the current key of
// each ring seals or tags, every key of the ring opens or is looked up,
// and a ring may hold a staged key, newer than the current one, that
// opens and is looked up but seals and tags nothing yet. Loaded rings
// carry a MaxAge: a copy older than that is loaded again before it seals,
// tags or looks up tags, so a rotation that waits MaxAge after changing
// the keys knows that no server still works with the keys from before
// the change. A value sealed under a key the copy lacks makes it load
// again (at most once a second) rather than fail at once.
//
// A data-key rotation re-wraps the sealed bytes of the inner store in
// place (RewrapBodies, page by page through the history of every
// resource; RewrapRecords), a compare-and-swap on the bytes read, so a
// value changed meanwhile is left as its writer sealed it. A blind-key
// rotation rebuilds the index through the store's Indexer, which tags
// under the current key. The order of the steps and the waits between
// them are the keys' owner's (internal/app; docs/format/partition-keys.md).
//
// # What is refused
//
// A search the blind index cannot answer exactly is refused with an
// *outcome.Error, 400, whose diagnostics say why, and never run: string
// searches without :exact (a prefix), :contains, token :text and
// system|, uri :below, date comparisons other than on _lastUpdated,
// number and quantity comparisons, and _sort on anything but _id and
// _lastUpdated. The same holds inside chains and _has, which are
// otherwise answered. (_text and _content never reach a store: the
// search parser leaves them out with a warning, or refuses them under
// strict handling, on every partition.)
package sealed
