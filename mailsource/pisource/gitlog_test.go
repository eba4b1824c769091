package pisource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	oidA = "3ec41108113de59c15aca6d332844af042178663"
	oidB = "fa46567e4086b8f61aba65bf92505ad10f86cec4"
	zero = "0000000000000000000000000000000000000000"
)

func TestParseChange(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       change
		err        error
	}{
		{"added", ":000000 100644 " + zero + " " + oidA + " A\tm", change{'A', zero, oidA, "m"}, nil},
		{"modified", ":100644 100644 " + oidA + " " + oidB + " M\tm", change{'M', oidA, oidB, "m"}, nil},
		{"renamed, with a score", ":100644 100644 " + oidA + " " + oidB + " R100\tx", change{'R', oidA, oidB, "x"}, nil},
		{"a path with a tab", ":000000 100644 " + zero + " " + oidA + " A\ta\tb", change{'A', zero, oidA, "a\tb"}, nil},
		{"sha256", ":000000 100644 " + strings.Repeat("0", 64) + " " + strings.Repeat("ab", 32) + " A\td", change{'A', strings.Repeat("0", 64), strings.Repeat("ab", 32), "d"}, nil},
		{"abbreviated", ":000000 100644 0000000 3ec4110 A\tm", change{}, ErrBadLog},
		{"no path", ":000000 100644 " + zero + " " + oidA + " A", change{}, ErrBadLog},
		{"no colon", "000000 100644 " + zero + " " + oidA + " A\tm", change{}, ErrBadLog},
		{"upper-case hex", ":000000 100644 " + zero + " " + strings.ToUpper(oidA) + " A\tm", change{}, ErrBadLog},
	} {
		got, err := parseChange(tc.line)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("%s: parseChange(%q) = %+v, %v; want %+v, %v", tc.name, tc.line, got, err, tc.want, tc.err)
		}
	}
}

func TestEvents(t *testing.T) {
	v1 := "63/cc7de5e163bf1c78c8a3b4363dfdf2a38405f1"
	for _, tc := range []struct {
		name string
		c    change
		want []event
	}{
		{"v2 add", change{'A', zero, oidA, "m"}, []event{{commit: "c", added: oidA}}},
		{"v2 next message", change{'M', oidA, oidB, "m"}, []event{{commit: "c", added: oidB}}},
		{"v2 removal writes d", change{'A', zero, oidA, "d"}, []event{{commit: "c", removed: oidA}}},
		{"v2 m gone beside d", change{'D', oidA, zero, "m"}, nil},
		{"v1 add", change{'A', zero, oidA, v1}, []event{{commit: "c", added: oidA}}},
		{"v1 removal", change{'D', oidA, zero, v1}, []event{{commit: "c", removed: oidA}}},
		{"v1 rewritten", change{'M', oidA, oidB, v1}, []event{{commit: "c", removed: oidA}, {commit: "c", added: oidB}}},
		{"other file", change{'A', zero, oidA, "README"}, nil},
		{"not 2/38", change{'A', zero, oidA, "6/3cc7de5e163bf1c78c8a3b4363dfdf2a38405f1"}, nil},
	} {
		var got []event
		eventsOf("c", tc.c, func(e event) { got = append(got, e) })
		if len(got) != len(tc.want) {
			t.Errorf("%s: eventsOf(%+v) = %+v, want %+v", tc.name, tc.c, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: eventsOf(%+v) = %+v, want %+v", tc.name, tc.c, got, tc.want)
			}
		}
	}
}

// TestReadLog reads git log's output for the v2 inbox of TestV2's first
// steps (testdata/v2.log: three messages, the second removed).
func TestReadLog(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "v2.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var added, removed []string
	err = readLog(f, func(e event) {
		if e.added != "" {
			added = append(added, e.added)
		}
		if e.removed != "" {
			removed = append(removed, e.removed)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	wantAdded := []string{"fa46567e4086b8f61aba65bf92505ad10f86cec4", "3ec41108113de59c15aca6d332844af042178663", "6bd04cac117442fad221ba248f7753bedb60b760"}
	if strings.Join(added, " ") != strings.Join(wantAdded, " ") || strings.Join(removed, " ") != oidA {
		t.Errorf("readLog: added %q, removed %q; want %q, [%s]", added, removed, wantAdded, oidA)
	}
	for _, bad := range []string{":000000 100644 " + zero + " " + oidA + " A\tm\n", "commit xyz\n", "hello\n"} {
		if err := readLog(strings.NewReader(bad), func(event) {}); !errors.Is(err, ErrBadLog) {
			t.Errorf("readLog(%q) = %v, want ErrBadLog", bad, err)
		}
	}
}

// FuzzReadLog: any output is read without a panic; every event names a
// commit and one blob, both object names.
func FuzzReadLog(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "v2.log")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("commit " + oidA + "\n\n:100644 000000 " + oidB + " " + zero + " D\t63/cc7de5e163bf1c78c8a3b4363dfdf2a38405f1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		readLog(strings.NewReader(string(data)), func(e event) {
			if !isOID(e.commit) || (e.added == "") == (e.removed == "") {
				t.Fatalf("event %+v", e)
			}
			if e.added != "" && (!isOID(e.added) || isZero(e.added)) || e.removed != "" && (!isOID(e.removed) || isZero(e.removed)) {
				t.Fatalf("event %+v names no blob", e)
			}
		})
	})
}
