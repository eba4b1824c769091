package boltstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testmount"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// An archive on a read-only file system (a snapshot, a backup) cannot be
// opened as usual, since the turnstile cannot be created or locked for
// writing; CannotWrite says so, and a ReadOnly store reads it, refuses
// writes and leaves the file system alone.
func TestReadOnlyFileSystem(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	n := a.Number(t, 1, 0)
	raw := storetest.Mail("<ro@example.org>", "on a snapshot")
	st, err := boltstore.Open(t.Context(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordLease(t.Context(), a.Lease(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), []store.Message{storetest.Message(n, raw, "ro@example.org", "")}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.CannotWrite(path); err != nil {
		t.Fatalf("CannotWrite(writable) = %v, want nil", err)
	}
	for _, lock := range []bool{true, false} {
		name := "with its lock file"
		if !lock {
			name = "without a lock file"
			if err := os.Remove(path + ".lock"); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(name, func(t *testing.T) {
			ro := filepath.Join(testmount.ReadOnly(t, dir), "messages.db")
			before, _ := os.ReadDir(filepath.Dir(ro))
			if err := boltstore.CannotWrite(ro); !errors.Is(err, syscall.EROFS) {
				t.Errorf("CannotWrite(read-only mount) = %v, want %v", err, syscall.EROFS)
			}
			if s, err := boltstore.Open(t.Context(), ro, boltstore.Options{}); err == nil {
				s.Close()
				t.Errorf("Open(read-only mount) without ReadOnly succeeded")
			}
			s, err := boltstore.Open(t.Context(), ro, boltstore.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("Open(read-only mount, ReadOnly) = %v", err)
			}
			defer s.Close()
			got, err := s.Get(t.Context(), n)
			if err != nil || string(got.Raw) != string(raw) {
				t.Errorf("Get = %q, %v; want the message", got.Raw, err)
			}
			if c, err := s.Count(t.Context()); c != 1 || err != nil {
				t.Errorf("Count = %d, %v; want 1", c, err)
			}
			if _, err := s.Put(t.Context(), []store.Message{storetest.Message(a.Number(t, 1, 1), raw, "", "")}); !errors.Is(err, boltstore.ErrReadOnly) {
				t.Errorf("Put on a read-only store = %v, want %v", err, boltstore.ErrReadOnly)
			}
			if err := s.RecordLease(t.Context(), a.Lease(2)); !errors.Is(err, boltstore.ErrReadOnly) {
				t.Errorf("RecordLease on a read-only store = %v, want %v", err, boltstore.ErrReadOnly)
			}
			after, _ := os.ReadDir(filepath.Dir(ro))
			if !slices.EqualFunc(before, after, func(a, b os.DirEntry) bool { return a.Name() == b.Name() }) {
				t.Errorf("files %v after reading, want %v", after, before)
			}
		})
	}
}

// What CannotWrite checks, where no read-only mount can be made: the
// file and its lock file when they exist, else the nearest existing
// directory that would hold them.
func TestCannotWrite(t *testing.T) {
	dir := t.TempDir()
	if err := boltstore.CannotWrite(filepath.Join(dir, "new", "deeper", "messages.db")); err != nil {
		t.Errorf("CannotWrite(a store to create in a writable directory) = %v", err)
	}
	if os.Geteuid() == 0 {
		t.Skip("running as root, whom file permissions do not stop: TestReadOnlyFileSystem covers a store that cannot be written")
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.CannotWrite(filepath.Join(locked, "messages.db")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("CannotWrite(in a directory without write permission) = %v, want %v", err, syscall.EACCES)
	}
	file := filepath.Join(dir, "messages.db")
	if err := os.WriteFile(file, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.CannotWrite(file); !errors.Is(err, syscall.EACCES) {
		t.Errorf("CannotWrite(a file without write permission) = %v, want %v", err, syscall.EACCES)
	}
}

func TestReadOnlyMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	if _, err := boltstore.Open(t.Context(), path, boltstore.Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing, ReadOnly) = %v, want %v", err, os.ErrNotExist)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
		t.Errorf("Open(missing, ReadOnly) created %v", ents)
	}
}
