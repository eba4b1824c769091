package boltstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
// "writer RUN PATH", "reader PATH".
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
		}
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
	ids, err := s.ByMessageID(t.Context(), "mp-3@example.org")
	if err != nil || len(ids) != 3*mpBatches*mpBatchSize/10 {
		t.Errorf("ByMessageID(mp-3) = %d numbers, %v; want %d", len(ids), err, 3*mpBatches*mpBatchSize/10)
	}
}
