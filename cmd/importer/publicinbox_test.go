package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/mailsource/pisource/pitest"
)

// manifestIDs reads a manifest: the Message-IDs (without angle brackets)
// by status.
func manifestIDs(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e struct {
			MessageID string `json:"message_id"`
			Status    string `json:"status"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("manifest line %q: %v", line, err)
		}
		got[e.Status] = append(got[e.Status], strings.Trim(e.MessageID, "<>"))
	}
	for _, ids := range got {
		slices.Sort(ids)
	}
	return got
}

// TestPublicInbox imports a v2 inbox made by the real public-inbox tools,
// one message removed with public-inbox-learn rm: the archive holds
// exactly the messages public-inbox shows; after new mail a re-run
// imports only the new message, reading only the new commits (--data) or
// all of them again (--store: the rest are duplicates).
func TestPublicInbox(t *testing.T) {
	ib := pitest.New(t, 2)
	msgs := [][]byte{ib.Message("one@x", 1), ib.Message("two@x", 2), ib.Message("three@x", 3), ib.Message("four@x", 4)}
	for _, m := range msgs {
		ib.Deliver(t, m)
	}
	ib.Remove(t, msgs[2])
	want := ib.MessageIDs(t)
	data := t.TempDir()
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	if status, got, stderr := importer(t, "", "--data", data, "--list", "test", "--manifest", manifest, ib.Dir); status != 0 || got != [3]int{3, 0, 0} {
		t.Fatalf("first import: status %d, %v, want 0, [3 0 0]\n%s", status, got, stderr)
	}
	if got := manifestIDs(t, manifest); !slices.Equal(got["imported"], want) || len(got) != 1 {
		t.Errorf("imported %v, want %q as public-inbox shows them", got, want)
	}
	if n := count(t, data); n != 3 {
		t.Errorf("the archive holds %d messages, want 3", n)
	}

	// Nothing new: nothing read, and that is no error.
	if status, got, stderr := importer(t, "", "--data", data, "--list", "test", "--manifest", manifest, ib.Dir); status != 0 || got != [3]int{0, 0, 0} {
		t.Fatalf("re-run with nothing new: status %d, %v, want 0, [0 0 0]\n%s", status, got, stderr)
	}

	ib.Deliver(t, ib.Message("five@x", 5))
	want = ib.MessageIDs(t)
	if status, got, stderr := importer(t, "", "--data", data, "--list", "test", "--manifest", manifest, ib.Dir); status != 0 || got != [3]int{1, 0, 0} {
		t.Fatalf("re-run after new mail: status %d, %v, want 0, [1 0 0]\n%s", status, got, stderr)
	}
	if got := manifestIDs(t, manifest); !slices.Equal(got["imported"], []string{"five@x"}) || len(got) != 1 {
		t.Errorf("re-run after new mail imported %v, want [five@x]", got)
	}
	if n := count(t, data); n != int64(len(want)) {
		t.Errorf("the archive holds %d messages, want %d (%q)", n, len(want), want)
	}

	// Another list: read again, all duplicates (archived in list test).
	if status, got, stderr := importer(t, "", "--data", data, "--list", "other", ib.Dir); status != 0 || got != [3]int{0, 4, 0} {
		t.Fatalf("import into another list: status %d, %v, want 0, [0 4 0]\n%s", status, got, stderr)
	}

	// --store: nothing remembered, the whole history is read again and
	// what is stored is a duplicate.
	store := "bolt:" + filepath.Join(data, "messages.db")
	if status, got, stderr := importer(t, "", "--store", store, "--authority", "bolt:"+filepath.Join(data, "runs.db"), "--list", "test", ib.Epoch(0)); status != 0 || got != [3]int{0, 4, 0} {
		t.Fatalf("--store import of the epoch: status %d, %v, want 0, [0 4 0]\n%s", status, got, stderr)
	}
}
