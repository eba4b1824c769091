package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/chibrary/chibrary/mailsource"
)

// ErrNothingFound: the inputs held no message at all (an empty file, a
// folder without mail), which is almost always a mistake in the paths.
var ErrNothingFound = errors.New("ingest: no message found")

type nothingFound struct{ paths []string }

func (e nothingFound) Error() string {
	return "nothing to import: no message found in " + strings.Join(e.paths, ", ")
}

func (e nothingFound) Unwrap() error { return ErrNothingFound }

// NothingFound wraps ErrNothingFound, naming the paths.
func NothingFound(paths []string) error { return nothingFound{paths} }

// CheckPaths checks that every input exists ("-" does) before anything is done.
func CheckPaths(paths []string) error {
	for _, p := range paths {
		if p == "-" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("cannot open %s: %w", p, err)
		}
	}
	return nil
}

// FilesOptions configure ImportFiles.
type FilesOptions struct {
	// Import configures the import of each input; its OnBatch is ignored.
	Import ImportOptions
	// Source configures the reading of the inputs; its Logger is Logger.
	Source mailsource.Options
	// Logger receives progress and what was odd about messages (nil: none).
	Logger *slog.Logger
	// Progress, if set, is called after every stored batch with the input,
	// how far into it (total 0 when unknown) and the totals so far.
	Progress func(path string, done, total int64, s Stats)
}

// ImportFiles imports the inputs paths in order: mbox files, Maildirs,
// folders of mbox and .eml files, "-" for the standard input (mailsource).
// It stops at the first input that cannot be read or at a store error
// (Import); inputs without any message give ErrNothingFound.
func ImportFiles(ctx context.Context, paths []string, opts FilesOptions) (Stats, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := CheckPaths(paths); err != nil {
		return Stats{}, err
	}
	var total Stats
	found := 0
	for _, path := range paths {
		n, s, err := importFile(ctx, path, opts, log, total)
		total.Add(s)
		found += n
		if err != nil {
			return total, err
		}
	}
	if found == 0 {
		return total, nothingFound{paths}
	}
	return total, nil
}

// HasMessages reports whether the inputs hold a message at all ("-" is
// taken to: it cannot be read twice). The importer asks before it creates
// an archive, so that an empty or mistyped input leaves none behind.
func HasMessages(ctx context.Context, paths []string, opts mailsource.Options) (bool, error) {
	for _, path := range paths {
		if path == "-" {
			return true, nil
		}
		src, err := mailsource.Open(ctx, path, opts)
		if err != nil {
			return false, err
		}
		if has, known := src.Probe(); known {
			src.Close()
			if has {
				return true, nil
			}
			continue
		}
		_, err = src.Next()
		src.Close()
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, io.EOF) {
			return true, nil // a message that breaks: the import says how
		}
	}
	return false, nil
}

// importFile imports one input and returns how many messages it found
// (in any partition) and the totals.
func importFile(ctx context.Context, path string, opts FilesOptions, log *slog.Logger, before Stats) (int, Stats, error) {
	sopts := opts.Source
	sopts.Logger = log
	src, err := mailsource.Open(ctx, path, sopts)
	if err != nil {
		return 0, Stats{}, err // mailsource's errors name the path
	}
	defer src.Close()
	log.Debug("importing", "path", path)
	iopts := opts.Import
	iopts.OnBatch = nil
	if opts.Progress != nil {
		iopts.OnBatch = func(s Stats) {
			done, size := src.Progress()
			all := before
			all.Add(s)
			opts.Progress(path, done, size, all)
		}
	}
	items := &sourceItems{src: src, log: log}
	s, err := Import(ctx, items, iopts)
	if iopts.OnBatch != nil {
		iopts.OnBatch(s)
	}
	skipped := src.Skipped()
	log.Info("read", "path", path, "format", src.Format(), "messages", items.n, "skipped", skipped, "imported", s.Imported, "duplicates", s.Duplicates, "failed", s.Failed)
	if err != nil {
		return items.n, s, fmt.Errorf("cannot import %s: %w", path, err)
	}
	// Every message read is stored: a source that can (public-inbox)
	// skips them next time. Not after a failure, nor for a share of the
	// input, which leaves the rest to other processes.
	if s.Failed == 0 && iopts.PartitionN == 0 {
		if err := src.Checkpoint(); err != nil {
			return items.n, s, err
		}
	}
	return items.n + int(skipped), s, nil
}

// sourceItems is a mailsource.Source as a Source of Items; it counts them
// and logs the warnings of the mbox reader.
type sourceItems struct {
	src *mailsource.Source
	log *slog.Logger
	n   int
}

func (a *sourceItems) Next() (Item, error) {
	it, err := a.src.Next()
	if err != nil {
		return Item{}, err
	}
	a.n++
	for _, w := range it.Warnings {
		a.log.Warn("odd message, stored as it is", "where", it.Where, "warning", w)
	}
	return Item{Raw: it.Raw, Where: it.Where, Err: it.Err}, nil
}
