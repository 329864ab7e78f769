package crypt

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// EnvVar is the environment variable LoadKeyring reads master keys from.
const EnvVar = "KILN_MASTER_KEY"

// KeyFile is the name of the master key file in the data folder.
const KeyFile = "master.key"

// LoadKeyring returns the master keys of this server. When the environment
// variable KILN_MASTER_KEY is set (and not blank) it holds them: either one
// base64 key (id 1), or comma-separated "id:base64" entries, the highest
// id being the current key. Otherwise they come from <dataDir>/master.key,
// one "id:base64" line per key (blank lines and lines starting with # are
// ignored); a missing file is created with one fresh random key, id 1,
// mode 0600 (the folder 0700 if missing). A file readable by other users
// is refused. Base64 may be standard or URL-safe, padded or not; every key
// is exactly 32 bytes.
//
// env looks up a variable (os.LookupEnv in production; nil: no
// environment). Errors name the entry or line at fault but never quote
// key material.
func LoadKeyring(dataDir string, env func(string) (string, bool)) (*Keyring, error) {
	if env != nil {
		if v, ok := env(EnvVar); ok && strings.TrimSpace(v) != "" {
			keys, err := parseEnvKeys(v)
			if err != nil {
				return nil, fmt.Errorf("crypt: %s: %w", EnvVar, err)
			}
			return newKeyringWiping(keys, EnvVar)
		}
	}
	if dataDir == "" {
		return nil, fmt.Errorf("crypt: %s is not set and there is no data folder for %s", EnvVar, KeyFile)
	}
	path := filepath.Join(dataDir, KeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = createKeyFile(dataDir, path)
	}
	if err != nil {
		return nil, err
	}
	defer clear(data)
	if err := CheckPrivate(path, "master key file"); err != nil {
		return nil, err
	}
	keys, err := parseFileKeys(data)
	if err != nil {
		return nil, fmt.Errorf("crypt: master key file %s: %w", path, err)
	}
	return newKeyringWiping(keys, path)
}

func newKeyringWiping(keys map[uint32][]byte, source string) (*Keyring, error) {
	defer func() {
		for _, k := range keys {
			clear(k)
		}
	}()
	k, err := NewKeyring(keys)
	if err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, source)
	}
	return k, nil
}

// parseEnvKeys parses "base64" or "id:base64,id:base64…".
func parseEnvKeys(v string) (map[uint32][]byte, error) {
	entries := strings.Split(v, ",")
	if len(entries) == 1 && !strings.Contains(entries[0], ":") {
		key, err := decodeKey(strings.TrimSpace(entries[0]))
		if err != nil {
			return nil, err
		}
		return map[uint32][]byte{1: key}, nil
	}
	keys := map[uint32][]byte{}
	for i, e := range entries {
		if err := addEntry(keys, strings.TrimSpace(e)); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	return keys, nil
}

// parseFileKeys parses one "id:base64" entry per line.
func parseFileKeys(data []byte) (map[uint32][]byte, error) {
	keys := map[uint32][]byte{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := addEntry(keys, line); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys in the file")
	}
	return keys, nil
}

func addEntry(keys map[uint32][]byte, entry string) error {
	idText, b64, ok := strings.Cut(entry, ":")
	if !ok {
		return errors.New(`want "id:base64"`)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 32)
	if err != nil || id == 0 {
		return errors.New("the key id is not a number from 1 to 4294967295")
	}
	if _, dup := keys[uint32(id)]; dup {
		return fmt.Errorf("key id %d appears twice", id)
	}
	key, err := decodeKey(strings.TrimSpace(b64))
	if err != nil {
		return fmt.Errorf("key %d: %w", id, err)
	}
	keys[uint32(id)] = key
	return nil
}

// decodeKey decodes a 32-byte key in any of the four base64 alphabets.
// Its errors do not wrap base64's (which quote offsets only, but stay
// clear of the input anyway).
func decodeKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("the key is empty")
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		key, err := enc.Strict().DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != KeySize {
			n := len(key)
			clear(key)
			return nil, fmt.Errorf("the key is %d bytes, want %d", n, KeySize)
		}
		return key, nil
	}
	return nil, errors.New("the key is not valid base64")
}

// createKeyFile writes a fresh key to path atomically: a private temporary
// file, synced, then hard-linked into place, which fails if another
// process created path meanwhile (its file is then read instead).
func createKeyFile(dataDir, path string) ([]byte, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("crypt: create the master key file: %w", err)
	}
	key := make([]byte, KeySize)
	defer clear(key)
	rand.Read(key)
	data := fmt.Appendf(nil, "1:%s\n", base64.StdEncoding.EncodeToString(key))

	tmp, err := os.CreateTemp(dataDir, ".master.key.*")
	if err != nil {
		return nil, fmt.Errorf("crypt: create the master key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp uses 0600; Chmod in case a umask or ACL widened it.
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		clear(data)
		return nil, fmt.Errorf("crypt: create the master key file %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		clear(data)
		if errors.Is(err, fs.ErrExist) {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("crypt: read the master key file: %w", err)
			}
			return data, nil
		}
		return nil, fmt.Errorf("crypt: create the master key file %s: %w", path, err)
	}
	if d, err := os.Open(dataDir); err == nil { // make the link durable
		_ = d.Sync()
		d.Close()
	}
	return data, nil
}

// CheckPrivate refuses a private key file (what names it: "master key
// file", "TLS private key") that users other than the owner can read or
// write; every secret file of the server is held to the same rule (not
// checked on Windows, whose modes do not say so).
func CheckPrivate(path, what string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s has mode %#o: other users can access it; run chmod 600 on it", what, path, perm)
	}
	return nil
}
