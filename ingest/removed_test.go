package ingest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/store"
)

// TestImportNearCopyOfRemoved: a removed message imported again with an
// extra blank line, an extra Received header or CRLF line ends stays
// removed (manifest status "removed", the removed call number, nothing
// stored), while a message with the same Message-ID and another body is
// imported under a number of its own.
func TestImportNearCopyOfRemoved(t *testing.T) {
	ctx := t.Context()
	st, runs := newArchive(t)
	leak := []byte("From: poster@example.org\nSubject: my password\nMessage-ID: <leak@example.org>\n\nIt is hunter2.\nDo not tell.\n")
	var manifest bytes.Buffer
	if _, err := ingest.Import(ctx, &items{list: []ingest.Item{{Raw: leak, Where: "in:1"}}}, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), Manifest: &manifest}); err != nil {
		t.Fatal(err)
	}
	first := readManifest(t, manifest.Bytes())
	if len(first) != 1 || first[0].Status != ingest.Imported {
		t.Fatalf("first import: manifest %s", manifest.String())
	}
	removed := first[0].CallNumber
	n, err := st.ByDigest(ctx, store.DigestOf(leak))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Remove(ctx, n, "a leaked password"); err != nil {
		t.Fatal(err)
	}

	crlf := bytes.ReplaceAll(leak, []byte("\n"), []byte("\r\n"))
	copies := []struct{ name, raw string }{
		{"an extra blank line", string(leak) + "\n"},
		{"an extra blank line in the body", strings.Replace(string(leak), "Do not", "\nDo not", 1)},
		{"an extra Received header", "Received: from relay.example.net by mx.example.org; Mon, 1 Jan 2024 00:00:00 +0000\n" + string(leak)},
		{"CRLF", string(crlf)},
		{"CRLF, a Received header and a blank line", "Received: from relay\r\n" + string(crlf) + "\r\n"},
	}
	var list []ingest.Item
	for _, c := range copies {
		list = append(list, ingest.Item{Raw: []byte(c.raw), Where: c.name})
	}
	other := bytes.Replace(leak, []byte("hunter2"), []byte("no longer what it was"), 1)
	list = append(list, ingest.Item{Raw: other, Where: "another body"})
	manifest.Reset()
	stats, err := ingest.Import(ctx, &items{list: list}, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), Manifest: &manifest})
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, manifest.Bytes())
	if len(m) != len(list) {
		t.Fatalf("manifest has %d lines, want %d: %s", len(m), len(list), manifest.String())
	}
	for i, c := range copies {
		if m[i].Status != ingest.Removed || m[i].CallNumber != removed {
			t.Errorf("the removed message with %s: manifest %+v, want status removed with %s", c.name, m[i], removed)
		}
	}
	if last := m[len(m)-1]; last.Status != ingest.Imported || last.CallNumber == removed {
		t.Errorf("another body under the same Message-ID: manifest %+v, want imported under a new number", last)
	}
	if stats.Imported != 1 || stats.Removed != int64(len(copies)) {
		t.Errorf("Import() = %+v, want 1 imported and %d removed", stats, len(copies))
	}
	if c, err := st.Count(ctx); err != nil || c != 1 {
		t.Errorf("Count() = %d, %v; want 1 (the other body only)", c, err)
	}
	ids, err := st.ByMessageID(ctx, "leak@example.org")
	if err != nil || len(ids) != 1 || ids[0].String() != m[len(m)-1].CallNumber {
		t.Errorf("ByMessageID(leak@example.org) = %v, %v; want the other body's number only", ids, err)
	}
}
