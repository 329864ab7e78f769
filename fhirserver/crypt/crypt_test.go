package crypt

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testKey is a deterministic master key: 32 bytes of b.
func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustKeyring(t testing.TB, keys map[uint32][]byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(keys)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return k
}

func mustSeal(t testing.TB, k *Keyring, plaintext, aad []byte) []byte {
	t.Helper()
	s, err := k.Seal(plaintext, aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	k := mustKeyring(t, map[uint32][]byte{1: testKey(1)})
	large := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, c := range []struct {
		name           string
		plaintext, aad []byte
	}{
		{"empty, no aad", nil, nil},
		{"empty with aad", []byte{}, []byte("user/alice")},
		{"short", []byte(`{"password":"argon2id$..."}`), []byte("user/alice")},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe}, nil},
		{"1 MiB", large, []byte("Patient/p1")},
	} {
		t.Run(c.name, func(t *testing.T) {
			sealed := mustSeal(t, k, c.plaintext, c.aad)
			if len(sealed) != len(c.plaintext)+Overhead {
				t.Errorf("sealed is %d bytes, want %d", len(sealed), len(c.plaintext)+Overhead)
			}
			if len(c.plaintext) >= 8 && bytes.Contains(sealed, c.plaintext[:8]) {
				t.Errorf("sealed value contains the plaintext")
			}
			got, err := k.Open(sealed, c.aad)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, c.plaintext) {
				t.Fatalf("Open: got %d bytes, want the %d sealed", len(got), len(c.plaintext))
			}
			if id, err := SealedKeyID(sealed); err != nil || id != 1 {
				t.Errorf("SealedKeyID = %d, %v; want 1", id, err)
			}
		})
	}
}

func TestSealIsRandomized(t *testing.T) {
	k := mustKeyring(t, map[uint32][]byte{1: testKey(1)})
	a := mustSeal(t, k, []byte("same"), nil)
	b := mustSeal(t, k, []byte("same"), nil)
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same plaintext are equal")
	}
	// Fresh data key and nonces each time: no shared field.
	for _, f := range []struct {
		name     string
		from, to int
	}{{"wrap nonce", headerSize, headerSize + nonceSize}, {"wrapped key", headerSize + nonceSize, dataNonceAt}, {"data nonce", dataNonceAt, ciphertextAt}} {
		if bytes.Equal(a[f.from:f.to], b[f.from:f.to]) {
			t.Errorf("two seals share the %s", f.name)
		}
	}
}

func TestAADMismatchFails(t *testing.T) {
	k := mustKeyring(t, map[uint32][]byte{1: testKey(1)})
	sealed := mustSeal(t, k, []byte("secret"), []byte("user/alice"))
	for _, aad := range [][]byte{nil, []byte(""), []byte("user/bob"), []byte("user/alice\x00"), []byte("user/alic")} {
		if _, err := k.Open(sealed, aad); !errors.Is(err, ErrOpen) {
			t.Errorf("Open with aad %q: got %v, want ErrOpen", aad, err)
		}
	}
	// And the other way: sealed without aad, opened with some.
	bare := mustSeal(t, k, []byte("secret"), nil)
	if _, err := k.Open(bare, []byte("x")); !errors.Is(err, ErrOpen) {
		t.Errorf("Open of a value sealed without aad, with aad: got %v, want ErrOpen", err)
	}
	if _, err := k.Open(bare, []byte{}); err != nil {
		t.Errorf("Open with empty aad of a value sealed with nil aad: %v (nil and empty are the same aad)", err)
	}
}

func TestEveryByteFlipFails(t *testing.T) {
	k := mustKeyring(t, map[uint32][]byte{1: testKey(1), 2: testKey(2)})
	aad := []byte("Patient/p1")
	sealed := mustSeal(t, k, []byte("a plaintext of some length"), aad)
	for i := range sealed {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(sealed)
			bad[i] ^= mask
			if got, err := k.Open(bad, aad); err == nil {
				t.Fatalf("byte %d ^ %#x: Open succeeded (%q)", i, mask, got)
			}
			// Rewrap checks the header and the wrapped key; a change in
			// the data nonce or ciphertext is Open's to find.
			if i < dataNonceAt {
				if _, err := k.Rewrap(bad); err == nil {
					t.Fatalf("byte %d ^ %#x: Rewrap succeeded", i, mask)
				}
			}
		}
	}
}

func TestTruncatedAndExtendedFail(t *testing.T) {
	k := mustKeyring(t, map[uint32][]byte{1: testKey(1)})
	sealed := mustSeal(t, k, []byte("hello"), nil)
	for n := range len(sealed) {
		if _, err := k.Open(sealed[:n], nil); err == nil {
			t.Fatalf("Open of the first %d bytes succeeded", n)
		}
	}
	if _, err := k.Open(sealed[:Overhead-1], nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("Open of a too-short value: got %v, want ErrMalformed", err)
	}
	if _, err := k.Open(append(bytes.Clone(sealed), 0), nil); err == nil {
		t.Fatal("Open with a byte appended succeeded")
	}
}

func TestRotation(t *testing.T) {
	k1 := mustKeyring(t, map[uint32][]byte{1: testKey(1)})
	aad := []byte("user/alice")
	old := mustSeal(t, k1, []byte("secret"), aad)

	k12 := mustKeyring(t, map[uint32][]byte{1: testKey(1), 2: testKey(2)})
	if k12.CurrentID() != 2 {
		t.Fatalf("CurrentID = %d, want 2", k12.CurrentID())
	}
	if got, err := k12.Open(old, aad); err != nil || string(got) != "secret" {
		t.Fatalf("Open of a key-1 value after key 2 was added: %q, %v", got, err)
	}
	if id, _ := SealedKeyID(mustSeal(t, k12, []byte("new"), nil)); id != 2 {
		t.Fatalf("a new seal is under key %d, want 2", id)
	}

	moved, err := k12.Rewrap(old)
	if err != nil {
		t.Fatalf("Rewrap: %v", err)
	}
	if id, _ := SealedKeyID(moved); id != 2 {
		t.Fatalf("Rewrap left the value under key %d, want 2", id)
	}
	if !bytes.Equal(moved[dataNonceAt:], old[dataNonceAt:]) {
		t.Fatal("Rewrap changed the data nonce or ciphertext")
	}
	if bytes.Equal(moved[headerSize:dataNonceAt], old[headerSize:dataNonceAt]) {
		t.Fatal("Rewrap did not re-wrap the data key")
	}

	k2 := mustKeyring(t, map[uint32][]byte{2: testKey(2)}) // key 1 retired
	if got, err := k2.Open(moved, aad); err != nil || string(got) != "secret" {
		t.Fatalf("Open of the rewrapped value with key 2 only: %q, %v", got, err)
	}
	if _, err := k2.Open(old, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open of a key-1 value with key 2 only: got %v, want ErrUnknownKey", err)
	}
	if _, err := k1.Open(moved, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open of a key-2 value with key 1 only: got %v, want ErrUnknownKey", err)
	}

	// Already current: an identical copy.
	again, err := k12.Rewrap(moved)
	if err != nil || !bytes.Equal(again, moved) {
		t.Fatalf("Rewrap of a current value: changed (%v)", err)
	}
	again[len(again)-1] ^= 1
	if _, err := k12.Open(moved, aad); err != nil {
		t.Fatalf("Rewrap returned its input instead of a copy: %v", err)
	}

	// Another key under the same id cannot open it.
	imposter := mustKeyring(t, map[uint32][]byte{2: testKey(9)})
	if _, err := imposter.Open(moved, aad); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open with another key under id 2: got %v, want ErrOpen", err)
	}
}

// TestStagedKey: a keyring whose current key is not its highest id seals
// under the current one and opens under both, and Rewrap moves values to
// the current one: a rotation stages the new key this way first.
func TestStagedKey(t *testing.T) {
	keys := map[uint32][]byte{1: testKey(1), 2: testKey(2)}
	staged, err := NewKeyringWithCurrent(keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	promoted, err := NewKeyringWithCurrent(keys, 2)
	if err != nil {
		t.Fatal(err)
	}
	if staged.CurrentID() != 1 || promoted.CurrentID() != 2 {
		t.Fatalf("CurrentID = %d and %d, want 1 and 2", staged.CurrentID(), promoted.CurrentID())
	}
	aad := []byte("a")
	under1 := mustSeal(t, staged, []byte("one"), aad)
	if id, _ := SealedKeyID(under1); id != 1 {
		t.Fatalf("the staged ring sealed under key %d, want 1", id)
	}
	under2 := mustSeal(t, promoted, []byte("two"), aad)
	if got, err := staged.Open(under2, aad); err != nil || string(got) != "two" {
		t.Fatalf("the staged key does not open: %q, %v", got, err)
	}
	back, err := staged.Rewrap(under2)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := SealedKeyID(back); id != 1 {
		t.Fatalf("Rewrap with key 1 current left key %d", id)
	}
	if _, err := NewKeyringWithCurrent(keys, 3); err == nil {
		t.Fatal("a current id outside the ring was accepted")
	}
	if _, err := NewKeyringWithCurrent(map[uint32][]byte{1: testKey(1)[:8]}, 1); err == nil {
		t.Fatal("a short key was accepted")
	}
}

func TestNewKeyringErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		keys map[uint32][]byte
	}{
		{"no keys", nil},
		{"id 0", map[uint32][]byte{0: testKey(1)}},
		{"short key", map[uint32][]byte{1: testKey(1)[:16]}},
		{"long key", map[uint32][]byte{1: append(testKey(1), 0)}},
	} {
		if _, err := NewKeyring(c.keys); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	// The keys are copied.
	key := testKey(1)
	k := mustKeyring(t, map[uint32][]byte{1: key})
	sealed := mustSeal(t, k, []byte("x"), nil)
	clear(key)
	if _, err := k.Open(sealed, nil); err != nil {
		t.Fatalf("the keyring depends on the caller's key slice: %v", err)
	}
}

func noEnv(string) (string, bool) { return "", false }

func envOf(v string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if name == EnvVar {
			return v, true
		}
		return "", false
	}
}

func TestLoadKeyringCreatesAndReusesFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // does not exist yet
	k1, err := LoadKeyring(dir, noEnv)
	if err != nil {
		t.Fatalf("LoadKeyring (create): %v", err)
	}
	if k1.CurrentID() != 1 {
		t.Errorf("CurrentID = %d, want 1", k1.CurrentID())
	}
	path := filepath.Join(dir, KeyFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %#o, want 0600", path, fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	line := strings.TrimSuffix(string(data), "\n")
	b64, ok := strings.CutPrefix(line, "1:")
	if !ok || strings.Contains(line, "\n") {
		t.Fatalf("key file %q: want one line 1:<base64>", data)
	}
	if key, err := base64.StdEncoding.DecodeString(b64); err != nil || len(key) != KeySize {
		t.Fatalf("key file: %d bytes, %v; want %d bytes of base64", len(key), err, KeySize)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("data folder holds %d entries, want the key file only", len(entries))
	}

	sealed := mustSeal(t, k1, []byte("kept"), nil)
	k2, err := LoadKeyring(dir, noEnv)
	if err != nil {
		t.Fatalf("LoadKeyring (reuse): %v", err)
	}
	if got, err := k2.Open(sealed, nil); err != nil || string(got) != "kept" {
		t.Fatalf("a second load has another key: %q, %v", got, err)
	}
	if data2, _ := os.ReadFile(path); !bytes.Equal(data, data2) {
		t.Fatal("the second load rewrote the key file")
	}
}

func TestLoadKeyringFile(t *testing.T) {
	k1, k2 := base64.StdEncoding.EncodeToString(testKey(1)), base64.RawURLEncoding.EncodeToString(testKey(2))
	for _, c := range []struct {
		name    string
		content string
		mode    os.FileMode
		current uint32 // 0: an error is expected
	}{
		{"one key", "1:" + k1 + "\n", 0o600, 1},
		{"rotation, comments, blanks", "# rotated\n1:" + k1 + "\n\n2:" + k2 + "\n", 0o600, 2},
		{"read-only", "1:" + k1 + "\n", 0o400, 1},
		{"readable by others", "1:" + k1 + "\n", 0o644, 0},
		{"empty", "", 0o600, 0},
		{"no id", k1 + "\n", 0o600, 0},
		{"bad base64", "1:" + k1[:20] + "!!" + k1[22:] + "\n", 0o600, 0},
		{"short key", "1:" + base64.StdEncoding.EncodeToString(testKey(1)[:31]) + "\n", 0o600, 0},
		{"duplicate id", "1:" + k1 + "\n1:" + k2 + "\n", 0o600, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, KeyFile)
			if err := os.WriteFile(path, []byte(c.content), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			k, err := LoadKeyring(dir, noEnv)
			if c.current == 0 {
				if err == nil {
					t.Fatal("no error")
				}
				noKeyMaterial(t, err, k1, k2, k1[:20], k2[:20])
				return
			}
			if err != nil {
				t.Fatalf("LoadKeyring: %v", err)
			}
			if k.CurrentID() != c.current {
				t.Fatalf("CurrentID = %d, want %d", k.CurrentID(), c.current)
			}
		})
	}
}

func TestLoadKeyringEnv(t *testing.T) {
	key1, key2 := testKey(1), testKey(2)
	std1 := base64.StdEncoding.EncodeToString(key1)
	url2 := base64.RawURLEncoding.EncodeToString(key2)
	ref := mustKeyring(t, map[uint32][]byte{1: key1, 2: key2, 7: testKey(7)})
	for _, c := range []struct {
		name    string
		value   string
		current uint32
	}{
		{"bare std base64", std1, 1},
		{"bare raw url base64", base64.RawURLEncoding.EncodeToString(key1), 1},
		{"bare raw std base64", base64.RawStdEncoding.EncodeToString(key1), 1},
		{"padded url base64, spaces", "  " + base64.URLEncoding.EncodeToString(key1) + "\n", 1},
		{"one entry with id", "7:" + base64.StdEncoding.EncodeToString(testKey(7)), 7},
		{"rotation", "1:" + std1 + ",2:" + url2, 2},
		{"rotation, newest first, spaces", "2:" + url2 + " , 1:" + std1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			k, err := LoadKeyring(dir, envOf(c.value))
			if err != nil {
				t.Fatalf("LoadKeyring: %v", err)
			}
			if k.CurrentID() != c.current {
				t.Fatalf("CurrentID = %d, want %d", k.CurrentID(), c.current)
			}
			// The keys are the ones given: the reference keyring opens.
			if _, err := ref.Open(mustSeal(t, k, []byte("x"), nil), nil); err != nil {
				t.Fatalf("a value sealed with the loaded key: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, KeyFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("LoadKeyring with %s set created or touched the key file (%v)", EnvVar, err)
			}
		})
	}

	// A blank variable counts as unset: the file is used.
	dir := t.TempDir()
	if _, err := LoadKeyring(dir, envOf("  ")); err != nil {
		t.Fatalf("LoadKeyring with a blank %s: %v", EnvVar, err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil {
		t.Fatalf("LoadKeyring with a blank %s did not fall back to the file: %v", EnvVar, err)
	}
}

func TestLoadKeyringEnvErrors(t *testing.T) {
	std1 := base64.StdEncoding.EncodeToString(testKey(1))
	secrets := []string{std1, std1[:20]}
	for _, c := range []struct {
		name, value string
	}{
		{"16 bytes", base64.StdEncoding.EncodeToString(testKey(1)[:16])},
		{"33 bytes", base64.StdEncoding.EncodeToString(append(testKey(1), 1))},
		{"bad base64", std1[:20] + "*" + std1[21:]},
		{"hex instead of base64", strings.Repeat("ab", 32)},
		{"non-canonical padding bits", std1[:len(std1)-2] + "B="},
		{"id 0", "0:" + std1},
		{"negative id", "-1:" + std1},
		{"id too large", "4294967296:" + std1},
		{"non-numeric id", std1[:10] + ":" + std1},
		{"duplicate id", "1:" + std1 + ",1:" + std1},
		{"empty entry", "1:" + std1 + ","},
		{"empty key", "1:"},
		{"two bare keys", std1 + "," + std1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := LoadKeyring(dir, envOf(c.value))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), EnvVar) {
				t.Errorf("error %q does not name %s", err, EnvVar)
			}
			noKeyMaterial(t, err, append(secrets, c.value)...)
			if _, err := os.Stat(filepath.Join(dir, KeyFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a bad %s fell back to the key file", EnvVar)
			}
		})
	}
}

// noKeyMaterial fails if err's message quotes any of secrets.
func noKeyMaterial(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if len(s) >= 8 && strings.Contains(err.Error(), s) {
			t.Fatalf("error %q quotes key material", err)
		}
	}
}

func FuzzOpen(f *testing.F) {
	k := mustKeyring(f, map[uint32][]byte{1: testKey(1), 2: testKey(2)})
	old := mustKeyring(f, map[uint32][]byte{1: testKey(1)})
	aad := []byte("aad")
	f.Add(mustSeal(f, k, []byte("hello"), aad), aad)
	f.Add(mustSeal(f, old, []byte("hello"), nil), []byte(nil))
	f.Add(mustSeal(f, k, nil, nil), []byte(nil))
	f.Add([]byte{}, []byte(nil))
	f.Add([]byte{formatV1, 0, 0, 0, 1}, aad)
	f.Add(make([]byte, Overhead), aad)
	f.Fuzz(func(t *testing.T, sealed, aad []byte) {
		orig := bytes.Clone(sealed)
		plain, err := k.Open(sealed, aad)
		if err == nil {
			// Only a genuine seal opens: it must survive a rewrap.
			moved, err := k.Rewrap(sealed)
			if err != nil {
				t.Fatalf("Rewrap of a value that opens: %v", err)
			}
			again, err := k.Open(moved, aad)
			if err != nil || !bytes.Equal(again, plain) {
				t.Fatalf("Open after Rewrap: %v", err)
			}
		} else if plain != nil {
			t.Fatal("Open returned plaintext with an error")
		}
		if _, err := k.Rewrap(sealed); err == nil {
			if _, err := SealedKeyID(sealed); err != nil {
				t.Fatalf("Rewrap accepted what SealedKeyID rejects: %v", err)
			}
		}
		if !bytes.Equal(sealed, orig) {
			t.Fatal("Open or Rewrap modified its input")
		}
	})
}
