//go:build unix

package main

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// Every file of the data folder, the SQLite WAL and shared-memory files
// included, is private to the server's user.
func TestServeDataFilesArePrivate(t *testing.T) {
	_, _, out, stop := startServe(t)
	data := dataDirOf(t, out.String())
	check := func() {
		t.Helper()
		err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == data { // the folder itself is the test's
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s is %v: readable by others", p, info.Mode().Perm())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check() // while running: the -wal and -shm files exist
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	check()
}
