package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/store/internal/compress"
)

// ErrReadOnly: a write to a store opened with Options.ReadOnly.
var ErrReadOnly = errors.New("boltstore: store opened read-only")

// openReadOnly opens an existing store at path for reading only. Without
// writers there is nobody to take turns with, so no turnstile.
func openReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil, fmt.Errorf("%w: %s is empty or not a regular file", ErrFormat, path)
	}
	s := &Store{path: path, log: opts.Logger.With("store", path), packs: newPacks(packDir(path), true), mapped: mappedPages{budget: opts.MappedBudget}}
	s.h = newHandles(path, &turnstile{}, opts.LockTimeout, opts.Linger, opts.PageSize, s.log)
	s.h.readOnly = true
	s.h.keepIdle = opts.KeepIdle // nobody writes, nobody waits
	s.h.opened = s.packs.generation
	s.comp = compress.New(dicts{s}, compression(opts.Compression), s.log)
	// A format 1 file stays as it is: its change feed is read in key
	// order (changes.go).
	if err := s.view(ctx, func(tx *bolt.Tx) error { _, err := checkFormat(tx); return err }); err != nil {
		s.comp.Close()
		s.h.close()
		s.packs.close()
		return nil, err
	}
	return s, nil
}

// CannotWrite returns nil when this process can write the store at path
// (the file, its turnstile, its packs' directory, or where they would be
// created), or why not: an error wrapping syscall.EROFS or syscall.EACCES.
// A store that cannot be written can still be read, with Options.ReadOnly.
func CannotWrite(path string) error {
	for _, p := range writeTargets(path) {
		if err := access(p); err != nil {
			return fmt.Errorf("cannot write %s: %w", p, err)
		}
	}
	return nil
}

// writeTargets lists what a writable open writes: the file and the lock
// file where they exist, else the nearest existing directory above them.
func writeTargets(path string) []string {
	var out []string
	needDir := false
	for _, p := range []string{path, path + ".lock", packDir(path)} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		} else if errors.Is(err, fs.ErrNotExist) {
			needDir = true
		}
	}
	if needDir {
		dir := filepath.Dir(path)
		for {
			if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
				break
			}
			dir = filepath.Dir(dir)
		}
		out = append(out, dir)
	}
	return out
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
