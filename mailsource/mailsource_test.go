package mailsource

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mbox"
)

func fx(parts ...string) string {
	return filepath.Join(append([]string{"..", "fixtures"}, parts...)...)
}

type want struct {
	where string
	raw   string
	err   error
}

// readAll reads every item of s, failing on a fatal error.
func readAll(t testing.TB, s *Source) []Item {
	t.Helper()
	var items []Item
	for {
		it, err := s.Next()
		if errors.Is(err, io.EOF) {
			return items
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		items = append(items, it)
	}
}

func check(t *testing.T, got []Item, want []want) {
	t.Helper()
	if len(got) != len(want) {
		for i, it := range got {
			t.Logf("got[%d] = %s err %v raw %q", i, it.Where, it.Err, it.Raw)
		}
		t.Fatalf("got %d items, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Where != w.where {
			t.Errorf("item %d: Where = %q, want %q", i, g.Where, w.where)
		}
		if w.err != nil {
			if !errors.Is(g.Err, w.err) {
				t.Errorf("item %d: Err = %v, want %v", i, g.Err, w.err)
			}
			continue
		}
		if g.Err != nil {
			t.Errorf("item %d: Err = %v, want none", i, g.Err)
		}
		if string(g.Raw) != w.raw {
			t.Errorf("item %d (%s): Raw =\n%q\nwant\n%q", i, g.Where, g.Raw, w.raw)
		}
	}
}

func open(t *testing.T, path string, opts Options) *Source {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

const (
	rd1 = "From: Alice <alice@example.org>\nTo: list@example.org\nSubject: quoting\nMessage-ID: <rd1@example.org>\nDate: Mon, 1 Jan 2001 10:00:00 +0000\n\n" +
		"A body line that began with From:\nFrom here on, things are quoted.\nAnd a quoted reply line:\n>From the previous message, quoted.\n>>From deeper still.\n> From with a space is not quoting.\n"
	rd2 = "From: Bob <bob@example.org>\nTo: list@example.org\nSubject: Re: quoting\nMessage-ID: <rd2@example.org>\nIn-Reply-To: <rd1@example.org>\nDate: Mon, 1 Jan 2001 11:00:00 +0000\n\n" +
		"From the start.\n\nFrom alice@example.org Mon Jan  1 10:00:00 2001\nThat looked like a separator, and was quoted.\n"
	rd3 = "From: Carol <carol@example.org>\nSubject: last\nMessage-ID: <rd3@example.org>\n\nLast message, ending with an empty body line.\n\n"

	md1 = "From: Ada Lovelace <ada@example.org>\nTo: demo@lists.example.org\nSubject: Maildir one (cur, seen)\nDate: Mon, 01 Jan 2024 10:00:00 +0000\nMessage-ID: <md1@example.org>\n\nFirst message, in cur/.\n"
	md2 = "From: Charles Babbage <charles@example.org>\r\nTo: demo@lists.example.org\r\nSubject: Re: Maildir one (cur, replied)\r\nDate: Mon, 01 Jan 2024 11:00:00 +0000\r\nMessage-ID: <md2@example.org>\r\nIn-Reply-To: <md1@example.org>\r\n\r\nFrom the start: a body line beginning with From, kept as is.\r\n>From quoted, kept as is too.\r\n"
	md4 = "From: Alan Turing <alan@example.com>\nSubject: Maildir between (new, sorts between cur's two)\nDate: Mon, 01 Jan 2024 11:20:00 +0000\nMessage-ID: <md4@example.org>\n\nSorted by name across cur/ and new/.\n"
	md3 = "From: Grace Hopper <grace@example.net>\nTo: demo@lists.example.org\nSubject: Maildir three (new)\nDate: Mon, 01 Jan 2024 12:00:00 +0000\n\nNew, unseen, and without a Message-ID."

	eml1 = "From: Ada Lovelace <ada@example.org>\nTo: demo@lists.example.org\nSubject: First .eml\nDate: Tue, 02 Jan 2024 10:00:00 +0000\nMessage-ID: <eml1@example.org>\n\nFrom the first .eml file: a body line beginning with From.\n"
	eml2 = "From: Charles Babbage <charles@example.org>\r\nSubject: Second .eml, CRLF\r\nDate: Tue, 02 Jan 2024 11:00:00 +0000\r\nMessage-ID: <eml2@example.org>\r\n\r\nCRLF line ends are kept.\r\n"
	eml3 = "From: Grace Hopper <grace@example.net>\nSubject: Third .eml, in a subdirectory\nDate: Tue, 02 Jan 2024 12:00:00 +0000\nMessage-ID: <eml3@example.org>\n\nDirectories are read recursively.\n"
)

func TestOpenMboxFiles(t *testing.T) {
	mboxrd := func(path string) []want {
		return []want{{path + ":1", rd1, nil}, {path + ":15", rd2, nil}, {path + ":28", rd3, nil}}
	}
	tests := []struct {
		name       string
		path       string
		opts       Options
		wantFormat string // prefix
		want       []want
	}{
		{name: "plain", path: fx("mbox", "mboxrd.mbox"), wantFormat: "mboxrd (auto: ", want: mboxrd(fx("mbox", "mboxrd.mbox"))},
		{name: "gzip", path: fx("mbox", "mboxrd.mbox.gz"), wantFormat: "mboxrd (gzip; auto: ", want: mboxrd(fx("mbox", "mboxrd.mbox.gz"))},
		{name: "bzip2", path: fx("mbox", "mboxrd.mbox.bz2"), wantFormat: "mboxrd (bzip2; auto: ", want: mboxrd(fx("mbox", "mboxrd.mbox.bz2"))},
		{name: "concatenated gzip members", path: fx("mbox", "mboxrd-multistream.mbox.gz"), wantFormat: "mboxrd (gzip; ", want: mboxrd(fx("mbox", "mboxrd-multistream.mbox.gz"))},
		{name: "gzip named .mbox", path: fx("mbox", "mboxrd-gz-named.mbox"), wantFormat: "mboxrd (gzip; ", want: mboxrd(fx("mbox", "mboxrd-gz-named.mbox"))},
		{name: "explicit format", path: fx("mbox", "mboxrd.mbox.gz"), opts: Options{Format: mbox.FormatMboxrd}, wantFormat: "mboxrd (gzip)", want: mboxrd(fx("mbox", "mboxrd.mbox.gz"))},
		{
			name: "pipermail .txt.gz", path: fx("mbox", "pipermail-2001-January.txt.gz"), wantFormat: "mboxrd (gzip; ",
			want: []want{
				{fx("mbox", "pipermail-2001-January.txt.gz") + ":1", "From: alice at example.org (Alice)\nDate: Mon, 1 Jan 2001 00:00:00 +0000\nSubject: [Demo] New year\nMessage-ID: <pm1@example.org>\n\nHappy new year.\n", nil},
				{fx("mbox", "pipermail-2001-January.txt.gz") + ":9", "From: bob at example.org (Bob)\nDate: Tue, 2 Jan 2001 08:30:00 +0000\nSubject: [Demo] New year\nIn-Reply-To: <pm1@example.org>\nReferences: <pm1@example.org>\nMessage-ID: <pm2@example.org>\n\nFrom me too: happy new year.\n", nil},
			},
		},
		{
			name: "mboxcl2", path: fx("mbox", "mboxcl2.mbox"), wantFormat: "mboxcl2 (auto: ",
			want: []want{
				{fx("mbox", "mboxcl2.mbox") + ":1", "From: Alice <alice@example.org>\nSubject: cl2 one\nMessage-ID: <cl1@example.org>\nContent-Length: 117\n\nA body with\nFrom lines inside.\n\nFrom mallory@example.org Wed Jan  3 09:00:00 2001\nThat line looked like a separator.\n", nil},
				{fx("mbox", "mboxcl2.mbox") + ":13", "From: Bob <bob@example.org>\nSubject: cl2 two\nMessage-ID: <cl2@example.org>\nContent-Length: 41\n\nFrom the top: a body starting with From.\n", nil},
				{fx("mbox", "mboxcl2.mbox") + ":21", "From: Carol <carol@example.org>\nSubject: cl2 three\nMessage-ID: <cl3@example.org>\nContent-Length: 29\n\nNo final newline in this body", nil},
			},
		},
		{
			name: "too large message", path: fx("mbox", "mboxrd.mbox"), opts: Options{MaxMessageSize: 300}, wantFormat: "mboxrd",
			want: []want{{fx("mbox", "mboxrd.mbox") + ":1", "", mbox.ErrTooLarge}, {fx("mbox", "mboxrd.mbox") + ":15", rd2, nil}, {fx("mbox", "mboxrd.mbox") + ":28", rd3, nil}},
		},
		{
			name: "leading garbage is a failed item", path: fx("mbox", "leading-garbage.mbox"), wantFormat: "mboxrd",
			want: []want{
				{fx("mbox", "leading-garbage.mbox") + ":1", "", mbox.ErrLeadingData},
				{fx("mbox", "leading-garbage.mbox") + ":4", "From: Alice <alice@example.org>\nSubject: after the garbage\nMessage-ID: <lg1@example.org>\n\nReal message.\n", nil},
			},
		},
		{
			name: "a file not starting with From is one message", path: fx("eml", "a-first.eml"), wantFormat: "eml",
			want: []want{{fx("eml", "a-first.eml"), eml1, nil}},
		},
		{
			name: "one message too large", path: fx("eml", "a-first.eml"), opts: Options{MaxMessageSize: 100}, wantFormat: "eml",
			want: []want{{fx("eml", "a-first.eml"), "", ErrTooLarge}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, tt.path, tt.opts)
			check(t, readAll(t, s), tt.want)
			if got := s.Format(); !strings.HasPrefix(got, tt.wantFormat) {
				t.Errorf("Format() = %q, want prefix %q", got, tt.wantFormat)
			}
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if done, total := s.Progress(); done != fi.Size() || total != fi.Size() {
				t.Errorf("Progress() at the end = %d, %d, want %d, %d", done, total, fi.Size(), fi.Size())
			}
		})
	}
}

func TestOpenMaildir(t *testing.T) {
	dir := fx("maildir")
	s := open(t, dir, Options{})
	check(t, readAll(t, s), []want{
		{filepath.Join(dir, "cur", "1704103200.M1P100.mail.example.org:2,S"), md1, nil},
		{filepath.Join(dir, "cur", "1704106800.M2P100.mail.example.org:2,RS"), md2, nil},
		{filepath.Join(dir, "new", "1704108000.M9P200.mail.example.org"), md4, nil},
		{filepath.Join(dir, "new", "1704110400.M3P100.mail.example.org"), md3, nil},
	})
	if got := s.Format(); got != KindMaildir {
		t.Errorf("Format() = %q, want %q", got, KindMaildir)
	}
	total := int64(len(md1) + len(md2) + len(md3) + len(md4))
	if done, tot := s.Progress(); done != total || tot != total {
		t.Errorf("Progress() = %d, %d, want %d, %d", done, tot, total, total)
	}
}

func TestMaildirMessageMovedToCur(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"cur", "new", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "new", "1.M1.h"), "Subject: one\n\n1\n")
	write(filepath.Join(dir, "new", "2.M2.h"), "Subject: two\n\n2\n")
	write(filepath.Join(dir, "new", "3.M3.h"), "Subject: three\n\n3\n")
	s := open(t, dir, Options{})
	// A mail reader sees the messages after Open listed them.
	if err := os.Rename(filepath.Join(dir, "new", "2.M2.h"), filepath.Join(dir, "cur", "2.M2.h:2,S")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "new", "3.M3.h")); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s)
	check(t, got, []want{
		{filepath.Join(dir, "new", "1.M1.h"), "Subject: one\n\n1\n", nil},
		{filepath.Join(dir, "new", "2.M2.h"), "Subject: two\n\n2\n", nil},
		{filepath.Join(dir, "new", "3.M3.h"), "", fs.ErrNotExist},
	})
}

func TestOpenEMLDir(t *testing.T) {
	dir := fx("eml")
	var logs bytes.Buffer
	s := open(t, dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	check(t, readAll(t, s), []want{
		{filepath.Join(dir, "a-first.eml"), eml1, nil},
		{filepath.Join(dir, "b-second.eml"), eml2, nil},
		{filepath.Join(dir, "sub", "c-third.eml"), eml3, nil},
	})
	if got := s.Format(); got != KindEMLDir {
		t.Errorf("Format() = %q, want %q", got, KindEMLDir)
	}
	if !strings.Contains(logs.String(), "notes.txt") {
		t.Errorf("log %q does not mention the skipped notes.txt", logs.String())
	}
	if strings.Contains(logs.String(), ".hidden") {
		t.Errorf("log %q mentions a dotfile, which is ignored silently", logs.String())
	}
}

func TestOpenEMLDirTooLarge(t *testing.T) {
	s := open(t, fx("eml"), Options{MaxMessageSize: 200})
	check(t, readAll(t, s), []want{
		{filepath.Join(fx("eml"), "a-first.eml"), "", ErrTooLarge},
		{filepath.Join(fx("eml"), "b-second.eml"), eml2, nil},
		{filepath.Join(fx("eml"), "sub", "c-third.eml"), eml3, nil},
	})
}

func gz(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestOpenStdin(t *testing.T) {
	mboxrd, err := os.ReadFile(fx("mbox", "mboxrd.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		in         []byte
		wantFormat string
		want       []want
	}{
		{name: "one message", in: []byte(eml2), wantFormat: "eml", want: []want{{"stdin", eml2, nil}}},
		{name: "one gzipped message", in: gz(t, []byte(eml1)), wantFormat: "eml (gzip)", want: []want{{"stdin", eml1, nil}}},
		{name: "mbox", in: mboxrd, wantFormat: "mboxrd (auto", want: []want{{"stdin:1", rd1, nil}, {"stdin:15", rd2, nil}, {"stdin:28", rd3, nil}}},
		{name: "gzipped mbox", in: gz(t, mboxrd), wantFormat: "mboxrd (gzip; auto", want: []want{{"stdin:1", rd1, nil}, {"stdin:15", rd2, nil}, {"stdin:28", rd3, nil}}},
		{name: "empty", in: nil, wantFormat: "mbox", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, "-", Options{Stdin: bytes.NewReader(tt.in)})
			check(t, readAll(t, s), tt.want)
			if got := s.Format(); !strings.HasPrefix(got, tt.wantFormat) {
				t.Errorf("Format() = %q, want prefix %q", got, tt.wantFormat)
			}
			if done, total := s.Progress(); done != int64(len(tt.in)) || total != 0 {
				t.Errorf("Progress() = %d, %d, want %d, 0", done, total, len(tt.in))
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, fx("mbox", "no-such-file.mbox"), Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) error %v, want %v", err, fs.ErrNotExist)
	}
	if _, err := Open(ctx, fx("mbox", "mboxrd.mbox"), Options{Format: "mbox"}); !errors.Is(err, mbox.ErrUnknownFormat) {
		t.Errorf("Open(format mbox) error %v, want %v", err, mbox.ErrUnknownFormat)
	}
	bad := filepath.Join(t.TempDir(), "bad.gz")
	if err := os.WriteFile(bad, []byte{0x1f, 0x8b, 0, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, bad, Options{}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Open(broken gzip) error %v, want one naming the file", err)
	}
}

func TestNextAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, fx("mbox", "mboxrd.mbox"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: error %v, want %v", err, context.Canceled)
	}
}

func TestCorpus(t *testing.T) {
	s := open(t, testcorpus.Path(t), Options{})
	n := 0
	for {
		it, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.Err != nil {
			t.Errorf("%s: %v", it.Where, it.Err)
		}
		n++
	}
	if n != 5256 {
		t.Errorf("read %d messages, want 5256", n)
	}
	if done, total := s.Progress(); done != total || total == 0 {
		t.Errorf("Progress() at the end = %d, %d, want equal and non-zero", done, total)
	}
}

// A compressed input cut short or corrupt, and a file that ends inside a
// Content-Length body: the message being read when the input fails is a
// failed item saying why, nothing of it is returned, and the messages
// before it are whole.
func TestOpenBrokenInputs(t *testing.T) {
	tests := []struct {
		name, file, reason string
	}{
		{"gzip cut short", "truncated.mbox.gz", "gzip data ends early"},
		{"bzip2 cut short", "truncated.mbox.bz2", "bzip2 data ends early"},
		{"gzip with a bad checksum", "bad-checksum.mbox.gz", "corrupt gzip data"},
	}
	for _, tt := range tests {
		path := fx("mbox", tt.file)
		wantItems := []want{{path + ":1", rd1, nil}, {path + ":15", rd2, nil}, {path + ":28", "", mbox.ErrIncomplete}}
		check := func(t *testing.T, got []Item, where string) {
			t.Helper()
			for i := range wantItems {
				wantItems[i].where = strings.Replace(wantItems[i].where, path, where, 1)
			}
			check(t, got, wantItems)
			for i := range wantItems {
				wantItems[i].where = strings.Replace(wantItems[i].where, where, path, 1)
			}
			if err := got[len(got)-1].Err; !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
		}
		t.Run(tt.name+" file", func(t *testing.T) {
			check(t, readAll(t, open(t, path, Options{})), path)
		})
		t.Run(tt.name+" stdin", func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			check(t, readAll(t, open(t, "-", Options{Stdin: bytes.NewReader(b)})), "stdin")
		})
	}
	t.Run("mboxcl2 cut inside a body", func(t *testing.T) {
		path := fx("mbox", "mboxcl2-truncated.mbox")
		got := readAll(t, open(t, path, Options{}))
		if len(got) != 3 || got[0].Err != nil || got[1].Err != nil || !errors.Is(got[2].Err, mbox.ErrIncomplete) || got[2].Where != path+":21" {
			t.Fatalf("got %+v, want two messages, then %s:21 failed with %v", got, path, mbox.ErrIncomplete)
		}
	})
	t.Run("one gzipped message cut short", func(t *testing.T) {
		z := gz(t, []byte(eml1))
		got := readAll(t, open(t, "-", Options{Stdin: bytes.NewReader(z[:len(z)-6])}))
		if len(got) != 1 || !errors.Is(got[0].Err, mbox.ErrIncomplete) || got[0].Raw != nil {
			t.Fatalf("got %+v, want one failed item", got)
		}
	})
}

// A folder of pipermail monthly archives (a Mailman 2 archive download):
// every month is read, in calendar order; files that are not mail are
// skipped with a warning; a broken month fails where it breaks and the
// next month is read.
func TestOpenFolder(t *testing.T) {
	dir := t.TempDir()
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"2000-December.txt.gz", "2001-January.txt.gz", "2001-February.txt.gz", "README"} {
		copyFile(fx("pipermail", name), filepath.Join(dir, name))
	}
	copyFile(fx("mbox", "truncated.mbox.gz"), filepath.Join(dir, "2001-March.txt.gz"))
	copyFile(fx("mbox", "mboxrd.mbox"), filepath.Join(dir, "old", "list.mbox"))
	copyFile(fx("eml", "a-first.eml"), filepath.Join(dir, "2001-April.eml"))

	var logs bytes.Buffer
	s := open(t, dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var where []string
	var failed []string
	for _, it := range readAll(t, s) {
		where = append(where, strings.TrimPrefix(it.Where, dir+string(filepath.Separator)))
		if it.Err != nil {
			failed = append(failed, it.Err.Error())
		}
	}
	wantWhere := []string{
		"2000-December.txt.gz:1",
		"2001-January.txt.gz:1", "2001-January.txt.gz:9",
		"2001-February.txt.gz:1", "2001-February.txt.gz:9",
		"2001-March.txt.gz:1", "2001-March.txt.gz:15", "2001-March.txt.gz:28",
		"2001-April.eml",
		"old/list.mbox:1", "old/list.mbox:15", "old/list.mbox:28",
	}
	if !slices.Equal(where, wantWhere) {
		t.Errorf("read\n%q\nwant\n%q", where, wantWhere)
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "2001-March.txt.gz:28") || !strings.Contains(failed[0], "gzip data ends early") {
		t.Errorf("failures %q, want one: the cut message of March", failed)
	}
	if !strings.Contains(logs.String(), "README") {
		t.Errorf("log %q does not mention the skipped README", logs.String())
	}
	if got, want := s.Format(), "folder (5 mbox files, 1 .eml files)"; got != want {
		t.Errorf("Format() = %q, want %q", got, want)
	}
	if done, total := s.Progress(); done != total || total == 0 {
		t.Errorf("Progress() at the end = %d, %d, want all of it", done, total)
	}
}

func TestLess(t *testing.T) {
	sorted := []string{
		"2000-December.txt.gz",
		"2001-Jan.txt",
		"2001-January.txt.gz",
		"2001-February.txt.gz",
		"2001-March.txt.gz",
		"2001-December.txt.gz",
		"2002-January.txt.gz",
		"Maybe.eml", // other text compares as bytes: upper case first
		"a/list.mbox.2",
		"a/list.mbox.10",
		"a/z/x.eml",
		"b.eml",
		"mayday.eml",
	}
	for i := range sorted {
		for j := range sorted {
			got := Less(sorted[i], sorted[j])
			want := cmpInt(i, j)
			if (got < 0) != (want < 0) || (got == 0) != (want == 0) {
				t.Errorf("Less(%q, %q) = %d, want the sign of %d", sorted[i], sorted[j], got, want)
			}
		}
	}
}
