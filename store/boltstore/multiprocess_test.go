package boltstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// childEnv selects a child role when the test binary re-executes itself:
// "writer RUN PATH", "reader PATH", "merge PATH STOP".
const childEnv = "CHIBRARY_BOLTSTORE_CHILD"

const (
	mpBatches   = 8
	mpBatchSize = 50
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := child(role); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func mpMail(run uint32, seq int) []byte {
	return storetest.Mail(fmt.Sprintf("mp-%d@example.org", seq%10), fmt.Sprintf("run %d seq %d %s", run, seq, bytes.Repeat([]byte("x"), seq*37%4000)))
}

func child(role string) error {
	var (
		kind, path string
		run        uint64
	)
	if _, err := fmt.Sscan(role, &kind); err != nil {
		return err
	}
	ctx := context.Background()
	switch kind {
	case "writer":
		if _, err := fmt.Sscan(role, &kind, &run, &path); err != nil {
			return err
		}
		// Recent keys merged every few batches, by whichever writer
		// leaves enough, while the others write and find theirs.
		defer boltstore.SetRecentMerge(120, 16)()
		s, err := boltstore.Open(ctx, path, boltstore.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		b, err := s.Binding(ctx)
		if err != nil {
			return err
		}
		codec, err := b.Codec()
		if err != nil {
			return err
		}
		for batch := range mpBatches {
			var msgs []store.Message
			for i := range mpBatchSize {
				seq := batch*mpBatchSize + i
				n, err := codec.Encode(callnumber.Fields{Run: uint32(run), Sequence: uint16(seq)})
				if err != nil {
					return err
				}
				msgs = append(msgs, storetest.Message(n, mpMail(uint32(run), seq), fmt.Sprintf("mp-%d@example.org", seq%10), ""))
			}
			res, err := s.Put(ctx, msgs)
			if err != nil {
				return err
			}
			for i, r := range res {
				if r.Duplicate || r.Number != msgs[i].Number {
					return fmt.Errorf("run %d batch %d: result %d = %v", run, batch, i, r)
				}
			}
		}
		return s.Close()
	case "reader":
		if _, err := fmt.Sscan(role, &kind, &path); err != nil {
			return err
		}
		s, err := boltstore.Open(ctx, path, boltstore.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		b, err := s.Binding(ctx)
		if err != nil {
			return err
		}
		codec, err := b.Codec()
		if err != nil {
			return err
		}
		stop := filepath.Join(filepath.Dir(path), "stop")
		last := int64(-1)
		seen := map[string]int{}
		for i := 0; ; i++ {
			if _, err := os.Stat(stop); err == nil {
				return s.Close()
			}
			c, err := s.Count(ctx)
			if err != nil {
				return err
			}
			if c < last {
				return fmt.Errorf("Count went down from %d to %d", last, c)
			}
			last = c
			run, seq := uint32(1+i%3), i%(mpBatches*mpBatchSize)
			n, _ := codec.Encode(callnumber.Fields{Run: run, Sequence: uint16(seq)})
			got, err := s.Get(ctx, n)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if err == nil && !bytes.Equal(got.Raw, mpMail(run, seq)) {
				return fmt.Errorf("Get(run %d seq %d) returned other bytes", run, seq)
			}
			// A Message-ID's numbers: in packed order, once each, never
			// fewer than before, whether recent keys or merged ones.
			id := fmt.Sprintf("mp-%d@example.org", i%10)
			ns, err := s.ByMessageID(ctx, id)
			if err != nil {
				return err
			}
			for j := 1; j < len(ns); j++ {
				if codec.Packed(ns[j-1]) >= codec.Packed(ns[j]) {
					return fmt.Errorf("ByMessageID(%s) = %v: out of order or twice", id, ns)
				}
			}
			if len(ns) < seen[id] {
				return fmt.Errorf("ByMessageID(%s) went down from %d numbers to %d", id, seen[id], len(ns))
			}
			seen[id] = len(ns)
		}
	case "merge":
		// Merges the recent keys, a chunk of 16 a transaction, and exits
		// with status 3 after chunk stop (unless it is negative).
		var stop int
		if _, err := fmt.Sscan(role, &kind, &path, &stop); err != nil {
			return err
		}
		defer boltstore.SetRecentMerge(1<<20, 16)()
		defer boltstore.SetAfterRecentChunk(func(c int) error {
			if c == stop {
				os.Exit(3)
			}
			if c == 0 {
				fmt.Println("merging")
			}
			return nil
		})()
		s, err := boltstore.Open(ctx, path, boltstore.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		return s.MergeRecent(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

// TestMultiProcess has three processes write batches into one file at once
// while a fourth reads; afterwards every message is there.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process test")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	auth := storetest.NewAuthority(t, shuffle.Mix)
	s, err := boltstore.Open(t.Context(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for run := uint32(1); run <= 3; run++ {
		if err := s.RecordLease(t.Context(), auth.Lease(run)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(role string) (*exec.Cmd, *bytes.Buffer) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		t.Cleanup(cancel)
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+role)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}
	reader, readerOut := start("reader " + path)
	type proc struct {
		cmd *exec.Cmd
		out *bytes.Buffer
	}
	var writers []proc
	for run := 1; run <= 3; run++ {
		c, o := start("writer " + strconv.Itoa(run) + " " + path)
		writers = append(writers, proc{c, o})
	}
	for i, w := range writers {
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v\n%s", i+1, err, w.out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reader.Wait(); err != nil {
		t.Errorf("reader: %v\n%s", err, readerOut)
	}

	s, err = boltstore.Open(t.Context(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Count(t.Context()); err != nil || n != 3*mpBatches*mpBatchSize {
		t.Errorf("Count() = %d, %v; want %d", n, err, 3*mpBatches*mpBatchSize)
	}
	for run := uint32(1); run <= 3; run++ {
		for seq := range mpBatches * mpBatchSize {
			n := auth.Number(t, run, seq)
			got, err := s.Get(t.Context(), n)
			if err != nil || !bytes.Equal(got.Raw, mpMail(run, seq)) {
				t.Errorf("Get(run %d seq %d) = %d bytes, %v; want the written message", run, seq, len(got.Raw), err)
			}
		}
	}
	for i := range 10 {
		id := fmt.Sprintf("mp-%d@example.org", i)
		ids, err := s.ByMessageID(t.Context(), id)
		if err != nil || len(ids) != 3*mpBatches*mpBatchSize/10 {
			t.Errorf("ByMessageID(%s) = %d numbers, %v; want %d", id, len(ids), err, 3*mpBatches*mpBatchSize/10)
		}
	}
}

// TestRecentMergeKilled kills merges of the recent keys: a process that
// exits after each of a merge's transactions in turn, then one killed at
// a random moment; after each, every message is found by its digest and
// its Message-ID, once, and a merge finishes what they left.
func TestRecentMergeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process test")
	}
	path := filepath.Join(t.TempDir(), "messages.db")
	auth := storetest.NewAuthority(t, shuffle.Mix)
	s, err := boltstore.Open(t.Context(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLease(t.Context(), auth.Lease(1)); err != nil {
		t.Fatal(err)
	}
	var msgs []store.Message
	put := func(n int) {
		t.Helper()
		var batch []store.Message
		for range n {
			seq := len(msgs) + len(batch)
			batch = append(batch, storetest.Message(auth.Number(t, 1, seq), mpMail(1, seq), fmt.Sprintf("mp-%d@example.org", seq%10), ""))
		}
		if _, err := s.Put(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, batch...)
	}
	check := func(when string) {
		t.Helper()
		r, err := boltstore.Open(t.Context(), path, boltstore.Options{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer r.Close()
		for _, m := range msgs {
			if n, err := r.ByDigest(t.Context(), m.Digest); err != nil || n != m.Number {
				t.Fatalf("%s: ByDigest(the digest of %v) = %v, %v", when, m.Number, n, err)
			}
		}
		for i := range 10 {
			id := fmt.Sprintf("mp-%d@example.org", i)
			want := 0
			for _, m := range msgs {
				if m.MessageID == id {
					want++
				}
			}
			if ns, err := r.ByMessageID(t.Context(), id); err != nil || len(ns) != want {
				t.Fatalf("%s: ByMessageID(%s) = %d numbers, %v; want %d", when, id, len(ns), err, want)
			}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	merge := func(stop int) *exec.Cmd {
		cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=merge "+path+" "+strconv.Itoa(stop))
		return cmd
	}
	put(100) // seven chunks
	for stop := range 7 {
		out, err := merge(stop).CombinedOutput()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("merge stopped after chunk %d: %v\n%s", stop, err, out)
		}
		check(fmt.Sprint("killed after chunk ", stop))
		put(3) // recent keys the next merge moves to a new bucket
	}
	put(3000)
	cmd := merge(-1)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "merging\n" {
		t.Fatalf("the merge said %q, %v; want it merging", line, err)
	}
	time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()
	if n, err := s.RecentKeys(t.Context()); err != nil || n == 0 {
		t.Logf("the merge was not killed before it ended: %d recent keys, %v", n, err)
	}
	check("killed at a random moment")
	if out, err := merge(-1).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	check("merged")
	if n, err := s.RecentKeys(t.Context()); err != nil || n != 0 {
		t.Errorf("RecentKeys() = %d, %v after a merge; want 0", n, err)
	}
	s.Close()
}
