package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
)

// TestMoveCommand: resolver move puts a message in another list, in the
// store: get, inspect and a rebuilt catalog all see it there.
func TestMoveCommand(t *testing.T) {
	dir, codec, n, _ := testArchive(t)
	ctx := t.Context()
	unknown, _ := codec.Encode(callnumber.Fields{Run: 1, Sequence: 43})
	tests := []struct {
		name   string
		args   []string
		status int
		out    []string // in stdout
		errs   []string // in stderr
	}{
		{"help", []string{"move", "--help"}, 0, []string{"resolver move --data /var/lib/chibrary --list linux-mips", "CHIBRARY_LIST"}, nil},
		{"no list", []string{"move", "--data", dir, n.String()}, 2, nil, []string{"--list: name the list"}},
		{"no message named", []string{"move", "--data", dir, "--list", "x"}, 2, nil, []string{"name the messages to move"}},
		{"a list no URL holds", []string{"move", "--data", dir, "--list", "!!!", n.String()}, 2, nil, []string{`--list "!!!"`}},
		{"malformed", []string{"move", "--data", dir, "--list", "x", "nope"}, 2, nil, []string{"is 4 characters long"}},
		{"unknown", []string{"move", "--data", dir, "--list", "x", unknown.String()}, 1, nil, []string{"no message in this archive has call number " + unknown.String(), "1 of 1 messages not moved"}},
		{"moved", []string{"move", "--data", dir, "--list", "Right-List", n.String()}, 0, []string{"moved " + n.String() + " from test to right-list on ", "A signed message"}, nil},
		{"there already", []string{"move", "--data", dir, "--list", "right-list", "--message-id", "<signed-1@example.com>"}, 0, []string{n.String() + " is in right-list already"}, nil},
		{"inspect", []string{"inspect", "--json", "--data", dir, n.String()}, 0, []string{n.String()}, nil},
		{"reindex", []string{"reindex", "--data", dir}, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(t, ctx, tt.args...)
			if status != tt.status {
				t.Fatalf("resolver %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), status, tt.status, stdout, stderr)
			}
			for _, s := range tt.out {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout does not contain %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.errs {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not contain %q:\n%s", s, stderr)
				}
			}
		})
	}
	// The rebuilt catalog has it in the list it was moved to.
	c, err := catalog.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if m, err := c.Message(ctx, n.String()); err != nil || m.List != "right-list" {
		t.Errorf("after reindex, the catalog has %s in %q (%v), want right-list", n, m.List, err)
	}
	if lists, err := c.Lists(ctx); err != nil || len(lists) != 1 || lists[0].Name != "right-list" {
		t.Errorf("after reindex, Lists = %+v, %v; want right-list alone", lists, err)
	}
}
