package imapwatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// State is what the watcher remembers of one mailbox between runs, saved
// atomically after every batch. It is an optimisation, not a safety device:
// losing it only makes the watcher fetch the mailbox again, as duplicates.
type State struct {
	// The mailbox the state is for; another is refused (ErrStateMismatch).
	Server      string `json:"server"`
	User        string `json:"user"`
	Mailbox     string `json:"mailbox"`
	UIDValidity uint32 `json:"uidvalidity"` // RFC 9051 section 2.3.1.1
	LastUID     uint32 `json:"last_uid"`    // of the last batch archived and acted on
	// Retry are UIDs at or below LastUID that failed for a reason that may
	// pass (no body, a break mid-message), retried at every connection.
	Retry   []uint32  `json:"retry,omitempty"`
	Updated time.Time `json:"updated"`
}

// maxRetry bounds State.Retry, so that a server refusing many messages
// cannot grow the state file without end.
const maxRetry = 1000

// LoadState reads a state file; a missing file is the zero State.
func LoadState(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("cannot read state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%w: %s: %v", ErrBadState, path, err)
	}
	return st, nil
}

// saveState writes st to path atomically and durably.
func saveState(path string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot save state: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot save state: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot save state: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot save state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot save state: %w", err)
	}
	return nil
}

// DefaultStatePath names the state file of t's mailbox in dir: readable,
// and unique thanks to a hash of user, server and mailbox.
func DefaultStatePath(dir string, t Target) string {
	key := t.User + "@" + t.Addr + "/" + t.Mailbox
	sum := sha256.Sum256([]byte(key))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '@' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, key)
	return filepath.Join(dir, "watcher", clean+"-"+hex.EncodeToString(sum[:4])+".json")
}
