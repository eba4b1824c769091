package catalog

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

func TestChangeID(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header string // an X-Change-ID value, or ""
		text   string
		want   string
	}{
		{"cover letter", "", "Hi\n\n---\nbase-commit: 9852d85ec9d4\nchange-id: 20240913-mgtime-20c98bcda88e\n\nBest regards,\n", "20240913-mgtime-20c98bcda88e"},
		{"header", "20250706-msm8974-fix-mss-e1b8e114b7e0", "no line\n", "20250706-msm8974-fix-mss-e1b8e114b7e0"},
		{"header wins", "20250706-a-e1b8e114b7e0", "change-id: 20240913-b-20c98bcda88e\n", "20250706-a-e1b8e114b7e0"},
		{"bad header, good line", "whatever", "change-id: 20240913-b-20c98bcda88e\n", "20240913-b-20c98bcda88e"},
		{"case and blanks", "", "  Change-ID:\t20231018-Strncpy_drivers-nvdimm-btt-c-15f93879989e \r\n", "20231018-strncpy_drivers-nvdimm-btt-c-15f93879989e"},
		{"unicode slug", "", "change-id: 20240101-größe-0123456789ab\n", "20240101-größe-0123456789ab"},
		{"quoted", "", "> change-id: 20240913-mgtime-20c98bcda88e\n", ""},
		{"in a sentence", "", "its change-id: 20240913-mgtime-20c98bcda88e\n", ""},
		{"Gerrit", "", "Change-Id: Ie0f824270b5871cff4305046b0f9b238acfb218f\n", ""},
		{"with a version, as prerequisites have", "", "change-id: 20240320-example-change-id:v1\n", ""},
		{"prerequisite", "", "prerequisite-change-id: 20240320-example-0123456789ab:v1\n", ""},
		{"no slug", "", "change-id: 20240320--0123456789ab\n", ""},
		{"short hash", "", "change-id: 20240320-x-0123456\n", ""},
		{"not hex", "", "change-id: 20240320-x-0123456789xz\n", ""},
		{"too long", "", "change-id: 20240320-" + strings.Repeat("a", MaxChangeID) + "-0123456789ab\n", ""},
		{"the first good line", "", "change-id: nonsense\nchange-id: 20240320-x-0123456789ab\nchange-id: 20240320-y-0123456789ab\n", "20240320-x-0123456789ab"},
		{"none", "", "", ""},
	} {
		var h []mailview.Field
		if tt.header != "" {
			h = []mailview.Field{{Name: "Subject", Value: "x"}, {Name: "X-Change-Id", Value: tt.header}}
		}
		if got := ChangeID(h, tt.text); got != tt.want {
			t.Errorf("%s: ChangeID(%q, %q) = %q, want %q", tt.name, tt.header, tt.text, got, tt.want)
		}
	}
}

// changeIDLineRE is a change-id line as b4 reads it (get_series_by_change_id),
// the oracle of changeIDLine.
var changeIDLineRE = regexp.MustCompile(`(?im)^[ \t]*change-id:[ \t]*(\S+)[ \t\r]*$`)

// changeIDByRE is ChangeID's reading of a text, by changeIDLineRE.
func changeIDByRE(text string) string {
	for _, m := range changeIDLineRE.FindAllStringSubmatch(text, changeIDLines) {
		if id := changeID(m[1]); id != "" {
			return id
		}
	}
	return ""
}

// FuzzChangeID: what ChangeID returns is a change-id, in lower case, no
// longer than MaxChangeID, and written in the text, case aside; and it is
// what b4's regular expression finds.
func FuzzChangeID(f *testing.F) {
	f.Add("---\nbase-commit: 9852d85ec9d4\nchange-id: 20240913-mgtime-20c98bcda88e\n")
	f.Add("Change-ID: 20231018-Strncpy-drivers-nvdimm-btt-c-15f93879989e \r\n")
	f.Add("> change-id: 20240913-mgtime-20c98bcda88e\nchange-id: 20240320-x-0123456789ab:v1\n")
	f.Add("\fchange-id: 20240913-a-20c98bcda88e\nchange-id:\v20240913-b-20c98bcda88e\nCHANGE-ID:20240913-c-20c98bcda88e\f\n")
	f.Add("change-id: 20240913-a-20c98bcda88e\r\r \t")
	f.Add(strings.Repeat("change-id: bad\n", 4) + "change-id: 20240913-a-20c98bcda88e\n")
	f.Fuzz(func(t *testing.T, text string) {
		got := ChangeID(nil, text)
		if want := changeIDByRE(text); got != want {
			t.Fatalf("ChangeID(%q) = %q, b4's regular expression finds %q", text, got, want)
		}
		if got == "" {
			return
		}
		if got != changeID(got) || len(got) > MaxChangeID {
			t.Fatalf("ChangeID(%q) = %q, not a change-id", text, got)
		}
		if !strings.Contains(strings.ToLower(text), got) {
			t.Fatalf("ChangeID(%q) = %q, not in the text", text, got)
		}
	})
}

// TestVersionsByChangeID: fixtures/changeid, series sent with b4. A
// cover letter whose subject changed between v1 and v2 keeps its
// change-id, and the two are linked; a lone patch renamed in v2 too (its
// change-id below its diff, in capitals); two series of one sender with
// one subject and two change-ids are not linked; the patches of a series
// link by their subjects as before, and Gerrit's Change-Id lines are no
// change-ids (two patches with two of them link by their subject).
func TestVersionsByChangeID(t *testing.T) {
	a := newArchive(t)
	a.load(filepath.Join("..", "fixtures", "changeid", "series.mbox"), "linux-mips")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	check := func(label string, wantVersion int, want ...string) {
		t.Helper()
		v, got, err := versionsOfCN(t, c, a.cn(label))
		if err != nil {
			t.Fatal(err)
		}
		var cns []string
		for _, g := range got {
			cns = append(cns, fmt.Sprintf("v%d %s", g.Version, g.CallNumber))
		}
		var wants []string
		for _, w := range want {
			n, l, _ := strings.Cut(w, " ")
			wants = append(wants, n+" "+a.cn(l))
		}
		if v != wantVersion || !slices.Equal(cns, wants) {
			t.Errorf("Versions(%s) = %d, %v; want %d, %v", label, v, cns, wantVersion, wants)
		}
	}
	check("ralink-v1-0", 1, "v2 ralink-v2-0")
	check("ralink-v2-0", 2, "v1 ralink-v1-0")
	check("ralink-v1-1", 1, "v2 ralink-v2-1")
	check("ralink-v2-1", 2, "v1 ralink-v1-1")
	check("build-a-0", 1)
	check("build-b-0", 2)
	check("lone-v1", 1, "v2 lone-v2")
	check("lone-v2", 2, "v1 lone-v1")
	check("gerrit-v1", 1, "v2 gerrit-v2")
	check("gerrit-v2", 2, "v1 gerrit-v1")
	check("ralink-v1-review", 0)
}

// TestVersionStat: a patch's diffstat is its own; a cover letter's sums
// the patches of its series in its thread from its sender (a file two
// patches touch counted once, another sender's patch with the series'
// tag left out); each version of Versions has its own.
func TestVersionStat(t *testing.T) {
	a := newArchive(t)
	a.load(filepath.Join("..", "fixtures", "changeid", "series.mbox"), "linux-mips")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	for _, tt := range []struct {
		label string
		want  *Diffstat
	}{
		{"ralink-v1-0", &Diffstat{Patches: 1, Files: 1, Added: 1, Deleted: 1}},
		{"ralink-v2-0", &Diffstat{Patches: 2, Files: 2, Added: 8, Deleted: 2}},
		{"ralink-v2-2", &Diffstat{Patches: 1, Files: 2, Added: 7, Deleted: 1}},
		{"lone-v2", &Diffstat{Patches: 1, Files: 1, Added: 1, Deleted: 1}},
		{"build-a-0", nil}, // a cover letter whose patches the archive lacks
		{"ralink-v1-review", nil},
	} {
		got, err := c.VersionStat(t.Context(), a.cn(tt.label))
		if err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("VersionStat(%s) = %+v, want %+v", tt.label, got, tt.want)
		}
	}
	_, vs, err := versionsOfCN(t, c, a.cn("ralink-v1-0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Stat == nil || *vs[0].Stat != (Diffstat{Patches: 2, Files: 2, Added: 8, Deleted: 2}) {
		t.Errorf("Versions(ralink-v1-0) = %+v, want v2 with 2 patches, 2 files, +8 -2", vs)
	}
}

// TestChangeIDCorpus: over the shared corpus, each message's text as the
// search index keeps it gives the change-id b4's regular expression finds
// in it (the sample has one such line).
func TestChangeIDCorpus(t *testing.T) {
	lines := 0
	n := eachCorpusMessage(t, func(m store.Stored) {
		d := extract(m, mailview.Options{})
		if got, want := ChangeID(nil, d.body), changeIDByRE(d.body); got != want {
			t.Errorf("message %v: ChangeID = %q, b4's regular expression finds %q", m.Number, got, want)
		}
		lines += len(changeIDLineRE.FindAllString(d.body, -1))
	})
	t.Logf("%d messages, %d lines of change-id form", n, lines)
}
