package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestImportedCount(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   int
		err    bool
	}{
		{"imported 10, duplicates 2, failed 0 in 1.0 s (12 msg/s)\n", 12, false},
		{"level=WARN msg=x\nimported 9711, duplicates 0, failed 0 in 6.3 s (1532 msg/s)\n", 9711, false},
		{"imported 10, duplicates 0, failed 1 in 1.0 s (10 msg/s)\n", 0, true},
		{"importer: cannot open x.mbox\n", 0, true},
		{"", 0, true},
	} {
		got, err := importedCount(tc.stderr)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("importedCount(%q) = %d, %v; want %d, error %v", tc.stderr, got, err, tc.want, tc.err)
		}
	}
}

// FuzzImportedCount reads any output: the count of a summary line the
// importer writes (cmd/importer's format) is its imported and duplicates.
func FuzzImportedCount(f *testing.F) {
	f.Add("noise\n", 3, 4)
	f.Fuzz(func(t *testing.T, before string, imported, dups int) {
		imported, dups = int(uint(imported)%1e9), int(uint(dups)%1e9)
		if strings.Contains(before, "imported ") {
			importedCount(before) // any text: no panic
			return
		}
		if before != "" && !strings.HasSuffix(before, "\n") {
			before += "\n"
		}
		line := fmt.Sprintf("imported %d, duplicates %d, failed %d in %.1f s (%.0f msg/s)\n", imported, dups, 0, 1.5, 10.0)
		got, err := importedCount(before + line)
		if err != nil || got != imported+dups {
			t.Errorf("importedCount(%q) = %d, %v; want %d", before+line, got, err, imported+dups)
		}
	})
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want int }{{50, 5}, {99, 10}, {100, 10}, {1, 1}, {0, 1}} {
		if got := pct(d, tc.p); got != time.Duration(tc.want) {
			t.Errorf("pct(1..10, %d) = %d, want %d", tc.p, got, tc.want)
		}
	}
}

func TestParseRiak(t *testing.T) {
	for _, tc := range []struct {
		in    string
		kit   bool
		addrs []string
		err   bool
	}{
		{"", false, nil, false},
		{"kit", true, nil, false},
		{"127.0.0.1:8087", false, []string{"127.0.0.1:8087"}, false},
		{"r1:8087,r2:8087", false, []string{"r1:8087", "r2:8087"}, false},
		{"r1", false, nil, true},
		{"r1:8087,", false, nil, true},
		{":8087", false, nil, true},
		{"riak://r1:8087", false, nil, true},
	} {
		kit, addrs, err := parseRiak(tc.in)
		if kit != tc.kit || !slices.Equal(addrs, tc.addrs) || (err != nil) != tc.err {
			t.Errorf("parseRiak(%q) = %v, %q, %v; want %v, %q, error %v", tc.in, kit, addrs, err, tc.kit, tc.addrs, tc.err)
		}
	}
}

// A part of a real /proc/PID/status (Linux 6).
const statusSample = "Name:\timporter\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 1745240 kB\nVmHWM:\t  205128 kB\nVmRSS:\t  204800 kB\nRssAnon:\t  163840 kB\nRssFile:\t   40960 kB\nRssShmem:\t       0 kB\nThreads:\t10\n"

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     procMemory
		err      bool
	}{
		{"linux", statusSample, procMemory{anon: 163840 << 10, file: 40960 << 10}, false},
		{"zero", "RssFile:\t0 kB\nRssAnon:\t0 kB\n", procMemory{}, false},
		{"no RssFile (before Linux 4.5)", "VmRSS:\t  204800 kB\nRssAnon:\t  163840 kB\n", procMemory{}, true},
		{"empty", "", procMemory{}, true},
		{"another unit", "RssAnon:\t1 MB\nRssFile:\t1 kB\n", procMemory{}, true},
		{"negative", "RssAnon:\t-1 kB\nRssFile:\t1 kB\n", procMemory{}, true},
		{"overflow", "RssAnon:\t9223372036854775807 kB\nRssFile:\t1 kB\n", procMemory{}, true},
	} {
		got, err := parseStatus([]byte(tc.in))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: parseStatus(%q) = %+v, %v; want %+v, error %v", tc.name, tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, errStatus) {
			t.Errorf("%s: parseStatus(%q) = %v; want %v", tc.name, tc.in, err, errStatus)
		}
	}
}

// FuzzParseStatus reads any text without panicking, and the two values
// of any status the kernel would write, whatever lines surround them.
func FuzzParseStatus(f *testing.F) {
	f.Add("Name:\timporter\n", "Threads:\t10\n", int64(163840), int64(40960))
	f.Fuzz(func(t *testing.T, before, after string, anon, file int64) {
		parseStatus([]byte(before + after)) // any text: no panic
		if strings.Contains(before+after, "RssAnon") || strings.Contains(before+after, "RssFile") {
			return
		}
		anon, file = int64(uint64(anon)%(1<<40)), int64(uint64(file)%(1<<40))
		if before != "" && !strings.HasSuffix(before, "\n") {
			before += "\n"
		}
		in := fmt.Sprintf("%sRssAnon:\t%8d kB\nRssFile:\t%8d kB\n%s", before, anon, file, after)
		got, err := parseStatus([]byte(in))
		if want := (procMemory{anon: anon << 10, file: file << 10}); err != nil || got != want {
			t.Errorf("parseStatus(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	})
}
