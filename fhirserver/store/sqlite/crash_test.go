package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// crashEnv names the database the crash child writes to; the child test
// skips unless it is set.
const crashEnv = "KILN_SQLITE_CRASH_CHILD_DB"

// TestCrashConsistency kills a writing process with SIGKILL at an arbitrary
// moment, several times over the same database, and checks after each crash
// that the database is consistent and that every write the child saw
// acknowledged is there.
func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test re-executes the test binary")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	for round := range 3 {
		acked := runCrashChild(t, path, 20)

		s := openTemp(t, path)
		checkConsistent(t, s)
		for _, a := range acked {
			if _, err := s.VRead(t.Context(), a.typ, a.id, a.version); err != nil {
				t.Fatalf("round %d: acknowledged %s/%s v%d lost: %v", round, a.typ, a.id, a.version, err)
			}
		}
		var versions int
		if err := s.reader.QueryRow(`SELECT count(*) FROM resource_versions`).Scan(&versions); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d acknowledged writes; %d versions stored", round, len(acked), versions)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

type ack struct {
	typ, id string
	version int64
}

// runCrashChild starts the child, lets it write until it has acknowledged
// minAcks writes and then for a random moment more (so the kill lands
// mid-write, not at a fixed point), kills it with SIGKILL and returns the
// writes it acknowledged. Counting writes rather than sleeping a fixed time
// keeps the test meaningful on a slow or busy machine.
func runCrashChild(t *testing.T, path string, minAcks int) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	enough := make(chan struct{})
	done := make(chan []ack)
	go func() {
		var acks []ack
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var a ack
			if _, err := fmt.Sscanf(sc.Text(), "ack %s %s %d", &a.typ, &a.id, &a.version); err == nil {
				acks = append(acks, a)
				if len(acks) == minAcks {
					close(enough)
				}
			}
		}
		done <- acks
	}()
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("crash child did not acknowledge %d writes within 60 s", minAcks)
	}
	time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred cleanup runs
		t.Fatal(err)
	}
	err = cmd.Wait()
	acks := <-done
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Exited() {
		t.Fatalf("crash child was not killed: %v (it must write until killed)", err)
	}
	return acks
}

// TestCrashChild is the process TestCrashConsistency kills: it writes
// creates, updates, deletes and two-resource transactions in a loop, and
// prints "ack <type> <id> <version>" once each is committed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("runs only as the child process of TestCrashConsistency, which sets KILN_SQLITE_CRASH_CHILD_DB")
	}
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	types := []string{"Patient", "Observation"}
	next := func(typ, id string) store.Write {
		var version int64 = 1
		deleted := false
		if cur, err := s.Read(ctx, typ, id); err == nil {
			version, deleted = cur.Version+1, cur.Deleted
		} else if !errors.Is(err, store.ErrNotFound) {
			fmt.Fprintln(os.Stderr, "crash child: read:", err)
			os.Exit(2)
		}
		w := store.Write{Type: typ, ID: id, Version: version, LastUpdated: time.Now(), Method: store.MethodUpdate}
		if version > 1 && !deleted && rand.IntN(8) == 0 {
			w.Method, w.Deleted = store.MethodDelete, true
			return w
		}
		w.Body = fmt.Appendf(nil, `{"resourceType":%q,"id":%q,"pad":%q}`, typ, id, strings.Repeat("x", rand.IntN(4000)))
		// Index rows naming the version, so a crash that kept rows of
		// one version and the pointer of another would show.
		v := strconv.FormatInt(version, 10)
		w.Index = &search.Rows{Keys: []string{"v\x1f" + v}, Dates: []search.DateRow{{Param: "v", Low: version, High: version + 1}},
			Numbers: []search.NumberRow{{Param: "v", Low: float64(version), High: float64(version)}}, Sorts: []search.SortRow{{Param: "v", Lo: version, Hi: version}}}
		return w
	}
	report := func(ws ...store.Write) {
		var b strings.Builder
		for _, w := range ws {
			fmt.Fprintf(&b, "ack %s %s %d\n", w.Type, w.ID, w.Version)
		}
		os.Stdout.WriteString(b.String())
	}
	deadline := time.Now().Add(60 * time.Second) // only if nobody kills us
	for i := 0; time.Now().Before(deadline); i++ {
		a := next(types[rand.IntN(2)], fmt.Sprint(rand.IntN(40)))
		if i%4 != 0 {
			if err := s.Put(ctx, a); err != nil {
				fmt.Fprintln(os.Stderr, "crash child: put:", err)
				os.Exit(2)
			}
			report(a)
			continue
		}
		b := next(types[rand.IntN(2)], fmt.Sprint(40+rand.IntN(40)))
		err := s.Transact(ctx, func(tx store.Tx) error {
			if err := tx.Put(ctx, a); err != nil {
				return err
			}
			return tx.Put(ctx, b)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash child: transact:", err)
			os.Exit(2)
		}
		report(a, b)
	}
	os.Exit(3)
}
