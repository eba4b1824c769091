package catalog

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mbox"
)

// How the archive's answer to a query may differ from public-inbox's, by
// design (docs/reading.md, "Search").
const (
	// same: the same Message-IDs.
	same = iota
	// fewer: the archive's answer is part of public-inbox's (why says
	// what public-inbox finds besides).
	fewer
	// more: public-inbox's answer is part of the archive's.
	more
)

// Why answers differ.
const (
	stemming    = "public-inbox also finds a word's other English forms (fix: fixes, fixed)"
	underscores = "the archive reads a_b as the phrase \"a b\", public-inbox as one word: s:patch finds [PATCH_V2], spin_lock finds spin_lock_irqsave"
	attached    = "the archive does not search parts it shows as attachments (text/x-diff) nor the file names of parts it shows inline"
	deleted     = "public-inbox leaves the lines of a deleted file (+++ /dev/null) out of dfa:"
)

// piCompareQueries are queries in public-inbox's syntax, every prefix at
// least once, booleans and ranges, with how the archive's answer
// compares with public-inbox 1.9's and why.
var piCompareQueries = []struct {
	q    string
	kind int
	why  string
}{
	{`s:"cache flush"`, same, ""},
	{"s:r4000", same, ""},
	{`s:"[PATCH]" AND s:mips`, more, underscores},
	{"f:ralf", same, ""},
	{`f:"ralf@linux-mips.org"`, same, ""},
	{"t:ralf", same, ""},
	{"c:linux-mips", same, ""},
	{"tc:kernel.org", same, ""},
	{"a:maciej", same, ""},
	{`b:"Ralf Baechle"`, fewer, attached},
	{`b:"page table"`, more, underscores},
	{`bs:"Ralf Baechle"`, fewer, attached},
	{"nq:segfault", fewer, stemming},
	{`q:"Signed-off-by"`, same, ""},
	{"n:patch", fewer, attached},
	{"l:linux-mips.vger.kernel.org", same, ""},
	{"m:20190101000000.GA1234@example.org", same, ""},
	{"z:..2000", same, ""},
	{"z:100000..", same, ""},
	{"d:20050101..20051231", same, ""},
	{"d:2019-01-01..", same, ""},
	{"d:..19990101", same, ""},
	{"dt:20100101000000..20100630000000", same, ""},
	{"rt:2015-01-01..2016-01-01", same, ""},
	{"dfn:Makefile", fewer, attached},
	{"dfn:arch/mips/kernel/setup.c", same, ""},
	{`dfa:"return 0"`, more, deleted},
	{"dfb:unlikely", fewer, stemming},
	{"dfhh:init", more, underscores},
	{"dfctx:spin_lock", more, underscores},
	{"dfpre:0000000", same, ""},
	{"s:mips AND f:ralf", same, ""},
	{"s:r4000 OR s:indy", same, ""},
	{"f:ralf NOT s:re", same, ""},
	{"(s:cache OR s:tlb) AND d:2001-01-01..2004-12-31", fewer, stemming},
	{`s:"[PATCH" -f:ralf`, more, underscores},
	{`"Signed-off-by: Ralf Baechle"`, same, ""},
	{"irq* s:fix", fewer, stemming},
}

// TestSearchAsPublicInbox indexes messages of the shared corpus with
// public-inbox 1.9 (public-inbox-init -V2, its importer, Xapian) and with
// the archive, and compares the Message-IDs each finds for each query.
// Skipped without public-inbox, its Xapian bindings or the corpus.
func TestSearchAsPublicInbox(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping public-inbox")
	}
	for _, cmd := range []string{"public-inbox-init", "perl", "git"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("%s is not installed", cmd)
		}
	}
	if err := exec.Command("perl", "-MPublicInbox::Search", "-MSearch::Xapian", "-e", "1").Run(); err != nil {
		t.Skip("public-inbox's Perl libraries or Search::Xapian are not installed")
	}
	path := testcorpus.Path(t)
	// Every 20th message: about 260, of every year of the list.
	raws := corpusSample(t, path, 20)
	dir := t.TempDir()
	msgs := filepath.Join(dir, "msgs")
	if err := os.Mkdir(msgs, 0o755); err != nil {
		t.Fatal(err)
	}
	a := newArchive(t)
	for i, raw := range raws {
		if err := os.WriteFile(filepath.Join(msgs, fmt.Sprintf("%05d", i)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		a.put(raw, "linux-mips")
	}
	c := openCatalog(t)
	mustSync(t, c, a.st)

	env := append(os.Environ(), "PI_CONFIG="+filepath.Join(dir, "pi-config"), "HOME="+dir, "TZ=UTC")
	run := func(stdin string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, dir
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
		}
		return string(out)
	}
	run("", "public-inbox-init", "-V2", "t", filepath.Join(dir, "inbox"), "http://example.org/t", "t@example.org")
	run("", "perl", "-e", piImport, msgs)
	var qs []string
	for _, q := range piCompareQueries {
		qs = append(qs, q.q)
	}
	lines := strings.Split(strings.TrimSuffix(run(strings.Join(qs, "\n")+"\n", "perl", "-e", piQuery), "\n"), "\n")
	if len(lines) != len(qs) {
		t.Fatalf("public-inbox answered %d lines for %d queries", len(lines), len(qs))
	}
	// The messages both hold (public-inbox gives a repeated Message-ID a
	// new one; the archive keeps both).
	all := map[string]bool{}
	var epoch time.Time
	res, err := c.Search(t.Context(), &Query{After: &epoch}, SearchOptions{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Messages {
		all[m.MessageID] = true
	}
	for i, tt := range piCompareQueries {
		if strings.HasPrefix(lines[i], "ERR ") {
			t.Errorf("public-inbox cannot run %q: %s", tt.q, lines[i])
			continue
		}
		var pi []string
		for _, id := range strings.Fields(lines[i]) {
			if all[id] {
				pi = append(pi, id)
			}
		}
		slices.Sort(pi)
		pi = slices.Compact(pi)
		q, err := ParseQuery(tt.q)
		if err != nil {
			t.Errorf("ParseQuery(%q) = %v", tt.q, err)
			continue
		}
		res, err := c.Search(t.Context(), q, SearchOptions{Limit: 100000})
		if err != nil {
			t.Errorf("Search(%q) = %v", tt.q, err)
			continue
		}
		var got []string
		for _, m := range res.Messages {
			got = append(got, m.MessageID)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		onlyArchive, onlyPI := difference(got, pi), difference(pi, got)
		t.Logf("%-50s archive %4d, public-inbox %4d", tt.q, len(got), len(pi))
		switch {
		case tt.kind == same && (len(onlyArchive) > 0 || len(onlyPI) > 0):
			t.Errorf("%q: the archive finds %d messages, public-inbox %d; only the archive %q, only public-inbox %q", tt.q, len(got), len(pi), first(onlyArchive), first(onlyPI))
		case tt.kind == fewer && len(onlyArchive) > 0:
			t.Errorf("%q: the archive finds %d messages public-inbox does not, where only %s: %q", tt.q, len(onlyArchive), tt.why, first(onlyArchive))
		case tt.kind == more && len(onlyPI) > 0:
			t.Errorf("%q: public-inbox finds %d messages the archive does not, where only %s: %q", tt.q, len(onlyPI), tt.why, first(onlyPI))
		case tt.kind != same && len(onlyArchive)+len(onlyPI) == 0:
			t.Logf("%q: the same messages, though %s", tt.q, tt.why)
		}
	}
}

// difference returns the strings of a (sorted) not in b (sorted).
func difference(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); !ok {
			out = append(out, s)
		}
	}
	return out
}

// corpusSample returns every nth message of the corpus at path.
func corpusSample(t *testing.T, path string, n int) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	r := mbox.NewReader(zr, mbox.Options{Name: path})
	var out [][]byte
	for i := 0; ; i++ {
		m, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%n == 0 {
			out = append(out, m.Raw)
		}
	}
}

// piImport adds the message files in a directory to the inbox "t" with
// public-inbox's own importer, which indexes them as it goes.
const piImport = `
use strict; use PublicInbox::Config; use PublicInbox::InboxWritable; use PublicInbox::Eml;
my $ibx = PublicInbox::Config->new->lookup_name('t') or die "no inbox t\n";
$ibx = PublicInbox::InboxWritable->new($ibx);
my $im = $ibx->importer(0);
for my $f (sort glob("$ARGV[0]/*")) {
	open my $fh, '<', $f or die "$f: $!";
	my $raw = do { local $/; <$fh> };
	$im->add(PublicInbox::Eml->new(\$raw));
}
$im->done;
`

// piQuery answers each query on stdin, a line each, with the Message-IDs
// public-inbox's search finds, as its WWW search does (approxidate, then
// Xapian's QueryParser with public-inbox's prefixes).
const piQuery = `
use strict; use PublicInbox::Config;
my $ibx = PublicInbox::Config->new->lookup_name('t') or die "no inbox t\n";
my $srch = $ibx->search or die "no search\n";
$| = 1;
while (my $q = <STDIN>) {
	chomp $q;
	$srch->query_approxidate($ibx->git, $q);
	my $mset = eval { $srch->mset($q, { limit => 100000, relevance => -1 }) };
	if ($@) { (my $e = "$@") =~ s/\s+/ /g; print "ERR $e\n"; next }
	my $smsgs = $srch->mset_to_smsg($ibx, $mset);
	print join(' ', map { $_->{mid} } @$smsgs), "\n";
}
`

// first returns the first few of ids, for a message.
func first(ids []string) []string { return ids[:min(len(ids), 5)] }
