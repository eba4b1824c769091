package patch

import (
	"slices"
	"strings"
	"testing"
)

// formatPatch is a message as git format-patch writes it: a commit log,
// a diffstat, two files (one new), and the signature that ends it.
const formatPatch = `Subject: [PATCH 1/2] MIPS: fix the cache flush

The flush missed the last line.

Signed-off-by: A Developer <dev@example.org>
---
 arch/mips/mm/c-r4k.c | 3 ++-
 arch/mips/Kconfig    | 1 +
 2 files changed, 3 insertions(+), 1 deletion(-)

diff --git a/arch/mips/mm/c-r4k.c b/arch/mips/mm/c-r4k.c
index 1111111..2222222 100644
--- a/arch/mips/mm/c-r4k.c
+++ b/arch/mips/mm/c-r4k.c
@@ -10,3 +10,4 @@ static void flush(void)
 	int a;
-	int b;
+	int b = 0;
+	int c;
 }
diff --git a/arch/mips/Kconfig b/arch/mips/Kconfig
new file mode 100644
--- /dev/null
+++ b/arch/mips/Kconfig
@@ -0,0 +1 @@
+config X
-- 
2.39.2
`

func TestScan(t *testing.T) {
	kinds, d := Scan(formatPatch, Limits{})
	lines := strings.SplitAfter(formatPatch, "\n")
	lines = lines[:len(lines)-1]
	if len(kinds) != len(lines) {
		t.Fatalf("Scan gave %d kinds for %d lines", len(kinds), len(lines))
	}
	want := map[string]Kind{
		"The flush missed the last line.\n": Text,
		"---\n":                             Text,
		" arch/mips/Kconfig    | 1 +\n":     Text,
		"diff --git a/arch/mips/Kconfig b/arch/mips/Kconfig\n": Header,
		"index 1111111..2222222 100644\n":                      Header,
		"+++ b/arch/mips/mm/c-r4k.c\n":                         Header,
		"@@ -10,3 +10,4 @@ static void flush(void)\n":          Hunk,
		"\tint a;\n":      Text, // a mailer ate no space here: checked below
		"-\tint b;\n":     Deleted,
		"+\tint b = 0;\n": Added,
		" }\n":            Context,
		"+config X\n":     Added,
		"-- \n":           Text,
		"2.39.2\n":        Text,
	}
	for i, l := range lines {
		if w, ok := want[l]; ok && l != "\tint a;\n" && kinds[i] != w {
			t.Errorf("line %d %q: kind %d, want %d", i, l, kinds[i], w)
		}
	}
	wantFiles := []File{{Path: "arch/mips/mm/c-r4k.c", Added: 2, Deleted: 1}, {Path: "arch/mips/Kconfig", Added: 1}}
	if !slices.Equal(d.Files, wantFiles) || d.Truncated {
		t.Errorf("Scan files = %+v (truncated %v), want %+v", d.Files, d.Truncated, wantFiles)
	}
	if d.Added() != 3 || d.Deleted() != 1 {
		t.Errorf("totals +%d -%d, want +3 -1", d.Added(), d.Deleted())
	}
}

func TestScanOthers(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		files []File
		kinds []Kind
	}{
		{"no diff", "--- snip ---\nhello\n+1 to that\n", nil, []Kind{Text, Text, Text}},
		{"diff -u with dates", "--- old.c\t2001-01-01\n+++ new.c\t2001-01-02\n@@ -1 +1 @@\n-a\n+b\n", []File{{Path: "new.c", Added: 1, Deleted: 1}},
			[]Kind{Header, Header, Hunk, Deleted, Added}},
		{"svn", "Index: foo/bar.c\n===================================================================\n--- foo/bar.c\t(revision 1)\n+++ foo/bar.c\t(working copy)\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
			[]File{{Path: "foo/bar.c", Added: 1, Deleted: 1}}, []Kind{Header, Header, Header, Header, Hunk, Context, Deleted, Added}},
		{"deleted file", "diff --git a/gone.c b/gone.c\ndeleted file mode 100644\n--- a/gone.c\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
			[]File{{Path: "gone.c", Deleted: 2}}, []Kind{Header, Header, Header, Header, Hunk, Deleted, Deleted}},
		{"rename", "diff --git a/old/x.c b/new/x.c\nsimilarity index 100%\nrename from old/x.c\nrename to new/x.c\nThanks\n",
			[]File{{Path: "new/x.c", OldPath: "old/x.c"}}, []Kind{Header, Header, Header, Header, Text}},
		{"hunk without counts", "--- a/x\n+++ b/x\n@@ garbled @@\n+a\n b\nbye\n", []File{{Path: "x", Added: 1}},
			[]Kind{Header, Header, Hunk, Added, Context, Text}},
		{"counts end the hunk", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n-- \nsig\n", []File{{Path: "x", Added: 1, Deleted: 1}},
			[]Kind{Header, Header, Hunk, Deleted, Added, Text, Text}},
		{"binary", "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nBinary files a/logo.png and b/logo.png differ\n",
			[]File{{Path: "logo.png", Binary: true}}, []Kind{Header, Header, Header}},
		{"CRLF", "--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n", []File{{Path: "x", Added: 1, Deleted: 1}},
			[]Kind{Header, Header, Hunk, Deleted, Added}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kinds, d := Scan(tt.text, Limits{})
			if !slices.Equal(kinds, tt.kinds) {
				t.Errorf("Scan kinds = %v, want %v", kinds, tt.kinds)
			}
			if !slices.Equal(d.Files, tt.files) {
				t.Errorf("Scan files = %+v, want %+v", d.Files, tt.files)
			}
		})
	}
}

// TestLimits: past MaxBytes lines are text, past MaxFiles files are
// counted out; either says Truncated.
func TestLimits(t *testing.T) {
	one := "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
	kinds, d := Scan(strings.Repeat(one, 10), Limits{MaxBytes: 3 * len(one)})
	if len(d.Files) != 3 || !d.Truncated || len(kinds) != 15 {
		t.Errorf("Scan past MaxBytes = %d files, truncated %v, %d kinds; want 3, true, the 15 lines read", len(d.Files), d.Truncated, len(kinds))
	}
	_, d = Scan(strings.Repeat(one, 10), Limits{MaxFiles: 4})
	if len(d.Files) != 4 || !d.Truncated {
		t.Errorf("Scan past MaxFiles = %d files, truncated %v; want 4, true", len(d.Files), d.Truncated)
	}
}

// FuzzScan: any text gives a kind per line, files with counts that add
// up to the added and deleted lines, paths within bounds.
func FuzzScan(f *testing.F) {
	f.Add(formatPatch)
	f.Add("--- a/x\n+++ b/x\n@@ -1,0 +1,0 @@\n\n\n")
	f.Add("diff --git a/x b/y\nrename from x\nrename to y\n@@ -0,0 +1 @@\n+z")
	f.Fuzz(func(t *testing.T, text string) {
		kinds, d := Scan(text, Limits{MaxFiles: 50})
		if n := strings.Count(text, "\n") + 1; len(kinds) > n {
			t.Fatalf("%d kinds for at most %d lines", len(kinds), n)
		}
		added, deleted := 0, 0
		for _, k := range kinds {
			switch k {
			case Added:
				added++
			case Deleted:
				deleted++
			}
		}
		if len(d.Files) > 50 || !d.Truncated && (added != d.Added() || deleted != d.Deleted()) {
			t.Fatalf("%d files, +%d -%d counted, +%d -%d lines", len(d.Files), d.Added(), d.Deleted(), added, deleted)
		}
		for _, f := range d.Files {
			if len(f.Path) > maxPath || len(f.OldPath) > maxPath {
				t.Fatalf("a path of %d bytes", len(f.Path))
			}
		}
	})
}

// Added and Deleted total the lines of all files, for the tests.
func (d *Diff) Added() (n int) {
	for _, f := range d.Files {
		n += f.Added
	}
	return n
}

func (d *Diff) Deleted() (n int) {
	for _, f := range d.Files {
		n += f.Deleted
	}
	return n
}
