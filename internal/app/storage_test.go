package app

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A secret file of the data folder is created once, private, and read
// back the same; a damaged or readable-by-others one stops the start
// instead of being replaced (which would orphan what it keyed).
func TestLoadSecretFile(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadCursorKey(dir, nil)
	if err != nil || len(key) != secretSize {
		t.Fatalf("first load: %d bytes, %v", len(key), err)
	}
	again, err := LoadCursorKey(dir, nil)
	if err != nil || !bytes.Equal(key, again) {
		t.Fatalf("second load returned another key (%v)", err)
	}
	path := filepath.Join(dir, "cursor.key")
	for _, tc := range []struct {
		name    string
		content []byte
		mode    os.FileMode
		want    string
	}{
		{"short", key[:20], 0o600, "holds 20 bytes"},
		{"long", append(key, 1), 0o600, "holds 33 bytes"},
		{"readable by others", key, 0o644, "other users can access it"},
	} {
		if tc.mode&0o077 != 0 && runtime.GOOS == "windows" {
			continue
		}
		if err := os.WriteFile(path, tc.content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadCursorKey(dir, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, tc.content) {
			t.Errorf("%s: the file was replaced", tc.name)
		}
	}
}
