package catalog

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

func TestPatchVersion(t *testing.T) {
	for _, tt := range []struct {
		subject string
		version int
		ok      bool
	}{
		{"[PATCH v3 2/7] MIPS: fix", 3, true},
		{"[PATCH V2] IP22/28: Switch over", 2, true},
		{"[PATCH] MIPS: fix", 1, true},
		{"[RFC PATCH v2 07/12] MIPS: Octeon", 2, true},
		{"[PATCH net-next v10 3/4] net: x", 10, true},
		{"[PATCH v0] Loongson2: x", 1, true},
		{"[PATCH v2024] x", 1, true},
		{"[Linux-mips] [PATCH v4 09/16] [loongson] pci", 4, true},
		{"[PATCH 2/8 v2] x", 2, true},
		{"[PATCH dev2] x", 1, true},
		{"[RFC v3 32/45] mips: x", 0, false},
		{"[Linux-mips] help", 0, false},
		{"MIPS: no tag", 0, false},
	} {
		v, ok := patchVersion(tt.subject)
		if v != tt.version || ok != tt.ok {
			t.Errorf("patchVersion(%q) = %d, %v; want %d, %v", tt.subject, v, ok, tt.version, tt.ok)
		}
	}
}

// TestVersions: the versions of a series link cover to cover and patch to
// patch, from the same sender (a new address with the same name too),
// the first posting of each version; not a reply, another sender's patch
// of the same subject, another list's, nor one years apart; a removed
// version leaves the links.
func TestVersions(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	seq := 0
	put := func(from, subject, list string, at time.Duration) string {
		seq++
		date := time.Date(2014, 3, 3, 10, 0, 0, 0, time.UTC).Add(at).Format(time.RFC1123Z)
		return a.put([]byte(fmt.Sprintf("From: %s\nSubject: %s\nMessage-ID: <%d@example.org>\nDate: %s\n\npatch %d\n", from, subject, seq, date, seq)), list)
	}
	const dev, moved = "Dev Eloper <dev@example.org>", "Dev Eloper <dev@work.example>"
	day := 24 * time.Hour
	cover1 := put(dev, "[PATCH 0/2] MIPS: Alchemy board updates", "l", 0)
	one1 := put(dev, "[PATCH 1/2] MIPS: Alchemy: one", "l", time.Second)
	two1 := put(dev, "[PATCH 2/2] MIPS: Alchemy: two", "l", 2*time.Second)
	reply := put("Reviewer <r@example.org>", "Re: [PATCH 1/2] MIPS: Alchemy: one", "l", day)
	cover2 := put(dev, "[PATCH v2 0/2] MIPS: Alchemy board updates", "l", 10*day)
	one2 := put(dev, "[PATCH v2 1/2] MIPS: Alchemy: one", "l", 10*day+time.Second)
	resent := put(dev, "[PATCH v2 RESEND 1/2] MIPS: Alchemy: one", "l", 12*day)
	one3 := put(moved, "[PATCH v3 1/3] MIPS: Alchemy: one", "l", 20*day)
	other := put("Someone Else <s@example.org>", "[PATCH v4] MIPS: Alchemy: one", "l", 21*day)
	elsewhere := put(dev, "[PATCH v4 1/2] MIPS: Alchemy: one", "other", 22*day)
	years := put(dev, "[PATCH v5 1/2] MIPS: Alchemy: one", "l", 3*365*day)
	mustSync(t, c, a.st)

	check := func(cn string, wantVersion int, want ...string) {
		t.Helper()
		v, got, err := versionsOfCN(t, c, cn)
		if err != nil {
			t.Fatal(err)
		}
		var cns []string
		for _, g := range got {
			cns = append(cns, fmt.Sprintf("v%d %s", g.Version, g.CallNumber))
		}
		if v != wantVersion || !slices.Equal(cns, want) {
			t.Errorf("Versions(%s) = %d, %v; want %d, %v", cn, v, cns, wantVersion, want)
		}
	}
	check(cover1, 1, "v2 "+cover2)
	check(cover2, 2, "v1 "+cover1)
	check(one1, 1, "v2 "+one2, "v3 "+one3)
	check(one2, 2, "v1 "+one1, "v3 "+one3)
	check(resent, 2, "v1 "+one1, "v3 "+one3)
	check(one3, 3, "v1 "+one1, "v2 "+one2)
	check(two1, 1)
	check(reply, 0)
	check(other, 4)
	check(elsewhere, 4)
	check(years, 5)

	n, _, err := a.codec().Parse(one2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.st.Remove(t.Context(), n, "sent by mistake"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	check(one1, 1, "v2 "+resent, "v3 "+one3)
}

// TestVersionsOnCorpus: on the sample, the versions of the patches in a
// set checked by hand (fixtures/versions) are linked, at least 90% of the
// groups whole, and none of them to a message outside its group. The
// catalog holds the sample's messages with "patch" in their subject (every
// message the versions table could hold, and the replies among them).
func TestVersionsOnCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the corpus")
	}
	path := testcorpus.Path(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	a := newArchive(t)
	var batch []store.Message
	flush := func() {
		if _, err := a.st.Put(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	r := mbox.NewReader(zr, mbox.Options{Name: path})
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		header, _, _ := bytes.Cut(m.Raw, []byte("\n\n"))
		if i := bytes.Index(header, []byte("\nSubject:")); i >= 0 {
			line, _, _ := bytes.Cut(header[i+1:], []byte("\n"))
			if bytes.Contains(bytes.ToLower(line), []byte("patch")) {
				meta, _ := mailmsg.Parse(m.Raw)
				batch = append(batch, storetest.Message(a.auth.Number(t, a.run, a.seq), m.Raw, meta.MessageID, "linux-mips"))
				if a.seq++; len(batch) == 500 {
					flush()
				}
			}
		}
	}
	flush()
	c := openCatalog(t)
	mustSync(t, c, a.st)
	groups := readVersionGroups(t, filepath.Join("..", "fixtures", "versions", "linux-mips-sample.txt"))
	whole, checked := 0, 0
	for _, g := range groups {
		cns := map[string]int{} // call number: version
		for _, p := range g.postings {
			ms, err := c.Copies(t.Context(), p.msgid)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 1 {
				t.Fatalf("%d messages with Message-ID %s, want 1", len(ms), p.msgid)
			}
			cns[ms[0].CallNumber] = p.version
		}
		checked++
		linked := true
		for cn, version := range cns {
			v, got, err := versionsOfCN(t, c, cn)
			if err != nil {
				t.Fatal(err)
			}
			if v != version {
				t.Errorf("%q: Versions(%s) says v%d, want v%d", g.title, cn, v, version)
			}
			seen := map[string]bool{}
			for _, o := range got {
				if _, ok := cns[o.CallNumber]; !ok {
					t.Errorf("%q: v%d %s is linked to %s (v%d %q), not of its group", g.title, version, cn, o.CallNumber, o.Version, o.Subject)
				}
				seen[o.CallNumber] = true
			}
			for other, ov := range cns {
				if ov != version && !seen[other] {
					linked = false
				}
			}
		}
		if linked {
			whole++
		} else if !g.takeover {
			t.Errorf("%q: its versions are not all linked", g.title)
		}
	}
	t.Logf("%d of %d hand-checked groups of versions linked whole", whole, checked)
	if whole*10 < checked*9 {
		t.Errorf("%d of %d groups linked whole, want at least 90%%", whole, checked)
	}
}

type versionGroup struct {
	title    string
	takeover bool
	postings []struct {
		version int
		msgid   string
	}
}

// readVersionGroups reads fixtures/versions: "## title" lines ("  #
// takeover" after a series another sender took over), then a "vN
// Message-ID" line per posting.
func readVersionGroups(t *testing.T, path string) []versionGroup {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []versionGroup
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			title, note, _ := strings.Cut(line[3:], "  #")
			out = append(out, versionGroup{title: title, takeover: strings.TrimSpace(note) == "takeover"})
		case strings.HasPrefix(line, "v") && len(out) > 0:
			v, id, ok := strings.Cut(line, " ")
			n, err := strconv.Atoi(v[1:])
			if !ok || err != nil {
				t.Fatalf("%s:%d: %q is not \"vN Message-ID\"", path, i+1, line)
			}
			g := &out[len(out)-1]
			g.postings = append(g.postings, struct {
				version int
				msgid   string
			}{n, id})
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			t.Fatalf("%s:%d: %q", path, i+1, line)
		}
	}
	return out
}

// TestMayHaveVersions: over the corpus, a message has a row in the
// versions table exactly when mayHaveVersions says of its subject as the
// catalog keeps it, so that a page that asks Versions only then misses
// no version.
func TestMayHaveVersions(t *testing.T) {
	c := corpusCatalog(t)
	rows, err := c.r.QueryContext(t.Context(), `SELECT m.cn, m.subject, EXISTS (SELECT 1 FROM versions v WHERE v.msg = m.id) FROM messages m`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, patches := 0, 0
	for rows.Next() {
		var cn, subject string
		var has bool
		if err := rows.Scan(&cn, &subject, &has); err != nil {
			t.Fatal(err)
		}
		n++
		if has {
			patches++
		}
		if may := mayHaveVersions(subject); may != has {
			t.Errorf("%s %q: mayHaveVersions = %v, a versions row: %v", cn, subject, may, has)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if patches == 0 || patches == n {
		t.Fatalf("%d of %d messages have versions rows: the corpus shows nothing", patches, n)
	}
	t.Logf("%d of %d messages may have versions", patches, n)
}

// TestVersionsStats: over the corpus, the diffstat Versions gives each
// version (from its row, or its series' for a cover letter) is the one
// VersionStat gives it alone.
func TestVersionsStats(t *testing.T) {
	c := corpusCatalog(t)
	rows, err := c.r.QueryContext(t.Context(), `SELECT m.cn FROM messages m JOIN versions v ON v.msg = m.id`)
	if err != nil {
		t.Fatal(err)
	}
	var cns []string
	for rows.Next() {
		var cn string
		if err := rows.Scan(&cn); err != nil {
			t.Fatal(err)
		}
		cns = append(cns, cn)
	}
	rows.Close()
	stats, covers := 0, 0
	for _, cn := range cns {
		_, vs, err := versionsOfCN(t, c, cn)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			want, err := c.VersionStat(t.Context(), v.CallNumber)
			if err != nil {
				t.Fatal(err)
			}
			if (v.Stat == nil) != (want == nil) || v.Stat != nil && *v.Stat != *want {
				t.Errorf("Versions(%s): %s %q has diffstat %+v, VersionStat says %+v", cn, v.CallNumber, v.Subject, v.Stat, want)
			}
			if v.Stat != nil {
				stats++
				if CoverLetter(v.Subject) {
					covers++
				}
			}
		}
	}
	// The corpus has few cover letters with versions and diffs
	// (TestVersionStat has one, through Versions too).
	if stats == 0 {
		if corpusLimit < testcorpus.Messages {
			// Under -race only the first messages are indexed, and
			// their versioned patches carry no diff.
			t.Skipf("no diffstat among the versions of %d patches in the first %d messages; the whole corpus (without -race) has them", len(cns), corpusLimit)
		}
		t.Fatalf("no diffstat among the versions of %d patches: the corpus shows nothing", len(cns))
	}
	t.Logf("%d diffstats (%d of cover letters) among the versions of %d patches", stats, covers, len(cns))
}

// versionsOfCN is Versions of the message under call number cn, checked
// against versionsOf, the way that reads the message's own row first.
func versionsOfCN(t testing.TB, c *Catalog, cn string) (int, []Version, error) {
	t.Helper()
	m := mustMessage(t, c, cn)
	v, vs, stat, err := c.Versions(t.Context(), &m)
	if err != nil {
		return v, vs, err
	}
	v2, vs2, stat2, err := c.versionsOf(t.Context(), cn, m.List)
	if err != nil {
		t.Fatalf("versionsOf(%s) = %v", cn, err)
	}
	// The patch's own diffstat, read beside its versions, is VersionStat's.
	var want *Diffstat
	if len(vs) > 0 {
		if want, err = c.VersionStat(t.Context(), cn); err != nil {
			t.Fatalf("VersionStat(%s) = %v", cn, err)
		}
	}
	if !reflect.DeepEqual(stat, want) || !reflect.DeepEqual(stat2, want) {
		t.Errorf("Versions(%s) and versionsOf say its own diffstat is %+v and %+v, VersionStat %+v", cn, stat, stat2, want)
	}
	if v2 != v || !reflect.DeepEqual(vs, vs2) {
		t.Errorf("Versions(%s) = %d, %+v; from its own row first %d, %+v", cn, v, vs, v2, vs2)
	}
	return v, vs, nil
}
