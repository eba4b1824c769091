package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		wantFailed bool
		want       []string // in this order
		wantNot    []string
	}{
		{
			name: "skips, a failure, a pass", file: "mixed.json", wantFailed: true,
			want: []string{
				"    a_test.go:6: boom\n--- FAIL: TestFail",
				"FAIL\ttj\t",
				"2 tests skipped (these did not run):\n",
				"  tj: TestSkip: a_test.go:4: no Riak: set CHIBRARY_TEST_RIAK\n",
				"  tj: TestSub/x: a_test.go:5: needs root\n",
				"failed (the first lines each test logged; its whole output is above):\n  tj: TestFail\n      a_test.go:6: boom\n",
			},
			wantNot: []string{"=== RUN   TestOK", "a log line", "--- PASS"},
		},
		{
			name: "a build failure, a package without tests", file: "build.json", wantFailed: true,
			want:    []string{"b/b.go:2:12: undefined: undefined\n", "FAIL\ttj/b [build failed]\n", "?   \ttj/c\t[no test files]\n"},
			wantNot: []string{"tests skipped"},
		},
		// go test -json -timeout 3s of a test that sleeps (real output):
		// no fail event for the test, the panic is its output.
		{
			name: "a test timed out", file: "timeout.json", wantFailed: true,
			want: []string{
				"=== RUN   TestHang\n", "    a_test.go:11: waiting for a message that never comes\n",
				"panic: test timed out after 3s\n\trunning tests:\n\t\tTestHang (3s)\n",
				"tj/t2.TestHang(", "--- FAIL: TestHang (did not end: the test binary stopped while it ran)\n",
				"FAIL\ttj/t2\t3.006s\n", "no test was skipped\n",
			},
			wantNot: []string{"TestOK"},
		},
		// A test that calls os.Exit(3) (real output): nothing after its log.
		{
			name: "a test exited", file: "exit.json", wantFailed: true,
			want: []string{
				"=== RUN   TestExit\n    a_test.go:11: about to exit\n",
				"--- FAIL: TestExit (did not end: the test binary stopped while it ran)\n",
				"FAIL\ttj/t3\t0.003s\n",
			},
			wantNot: []string{"TestOK"},
		},
		// A failure whose processes' logs follow it: at the end, the
		// first line of each message, without what it continues with.
		{
			name: "a failure and logs", file: "dump.json", wantFailed: true,
			want: []string{
				"FAIL\ttj/e\t",
				"  tj/e: TestE2E\n      e_test.go:10: killed node 2 after 3026 runs\n      e_test.go:12: importer d exited 1:\n" +
					"      harness_test.go:233: log of coordinator a (/tmp/a.log):\n",
			},
		},
		{
			name: "all passed", file: "pass.json", wantFailed: false,
			want:    []string{"ok  \ttj\t", "no test was skipped\n"},
			wantNot: []string{"PASS\n", "=== RUN"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			failed, err := summarize(bytes.NewReader(in), &out)
			if err != nil || failed != tt.wantFailed {
				t.Errorf("summarize = %v, %v; want %v, nil", failed, err, tt.wantFailed)
			}
			got := out.String()
			at := 0
			for _, w := range tt.want {
				i := strings.Index(got[at:], w)
				if i < 0 {
					t.Errorf("output lacks %q after offset %d:\n%s", w, at, got)
					continue
				}
				at += i + len(w)
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("output contains %q:\n%s", w, got)
				}
			}
		})
	}
	if failed, err := summarize(strings.NewReader(""), &bytes.Buffer{}); !failed || err == nil {
		t.Errorf("summarize(no input) = %v, %v; want a failure: go test did not run", failed, err)
	}
}
