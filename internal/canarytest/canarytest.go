// Package canarytest finds canary values (distinctive values a test
// writes) in bytes the server left behind: files of a data folder,
// MongoDB documents, log output. The tests that prove what "erased" and
// "encrypted at rest" mean share it, so that each looks for every form a
// value can take on disk.
package canarytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// Values maps what each canary stands for ("last name") to its value.
type Values map[string]string

// Forms are the byte strings that betray value: itself, lower-cased and
// search-normalized (the index folds), query- and path-escaped (a URL),
// hex, and base64 in the standard and URL alphabets at each of the three
// alignments a value can take inside a longer encoded text (a value at
// byte offset 1 or 2 of the encoded input shifts every character): the
// characters that depend on bytes before or after the value are left out.
func Forms(value string) map[string][]byte {
	forms := map[string][]byte{}
	for _, v := range []string{value, strings.ToLower(value), search.Normalize(value)} {
		forms["raw "+v] = []byte(v)
		forms["query-escaped "+v] = []byte(url.QueryEscape(v))
		forms["path-escaped "+v] = []byte(url.PathEscape(v))
		forms["hex "+v] = []byte(hex.EncodeToString([]byte(v)))
		for k := range 3 {
			in := append(bytes.Repeat([]byte{0}, k), v...)
			start := (8*k + 5) / 6 // the first character made only of v's bits
			end := 8 * len(in) / 6 // past the last one
			for name, enc := range map[string]*base64.Encoding{"base64": base64.RawStdEncoding, "base64url": base64.RawURLEncoding} {
				s := enc.EncodeToString(in)
				forms[fmt.Sprintf("%s@%d %s", name, k, v)] = []byte(s[start:end])
			}
		}
	}
	return forms
}

// Hits lists where blob (named where) holds a form of a canary, compared
// case-insensitively: one line "<what>: <where>: <forms found>" per value.
func Hits(where string, blob []byte, v Values) []string {
	low := bytes.ToLower(blob)
	var hits []string
	for what, value := range v {
		var found []string
		for form, b := range Forms(value) {
			if n := bytes.Count(low, bytes.ToLower(b)); n > 0 {
				found = append(found, fmt.Sprintf("%s ×%d", form, n))
			}
		}
		if len(found) > 0 {
			slices.Sort(found)
			hits = append(hits, fmt.Sprintf("%s: %s: %s", what, where, strings.Join(found, ", ")))
		}
	}
	slices.Sort(hits)
	return hits
}

// SweepFolder reads every file under dir, whatever it is (databases,
// their WAL and shared memory, logs, keys), and lists the canaries found.
func SweepFolder(t testing.TB, dir string, v Values) []string {
	t.Helper()
	var hits []string
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(dir, path)
		hits = append(hits, Hits(rel, b, v)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no file under %s: the sweep would prove nothing", dir)
	}
	return hits
}

// SweepMongo reads every document of every collection of the databases
// at uri, as raw BSON, and lists the canaries found. Fewer than minDocs
// documents fail the test: the sweep would prove nothing.
func SweepMongo(t testing.TB, uri string, v Values, minDocs int, dbs ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mc, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Disconnect(ctx)
	var hits []string
	docs := 0
	for _, db := range dbs {
		names, err := mc.Database(db).ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for _, coll := range names {
			cur, err := mc.Database(db).Collection(coll).Find(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			for cur.Next(ctx) {
				docs++
				hits = append(hits, Hits(db+"."+coll, cur.Current, v)...)
			}
			if err := cur.Err(); err != nil {
				t.Fatal(err)
			}
			cur.Close(ctx)
		}
	}
	if docs < minDocs {
		t.Fatalf("only %d documents read: the sweep would prove nothing", docs)
	}
	return hits
}
