package main

import (
	"encoding/json"

	"github.com/chibrary/chibrary/callnumber"
	"strings"
	"testing"
	"time"
)

func TestRemoveCommand(t *testing.T) {
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
		{"no message named", []string{"remove", "--data", dir}, 2, nil, []string{"name the messages to remove"}},
		{"bad reason", []string{"remove", "--data", dir, "--reason", "two\nlines", n.String()}, 2, nil, []string{"--reason"}},
		{"malformed", []string{"remove", "--data", dir, "nope"}, 2, nil, []string{"is 4 characters long"}},
		{"unknown", []string{"remove", "--data", dir, unknown.String()}, 1, nil, []string{"no message in this archive has call number " + unknown.String(), "1 of 1 messages not removed"}},
		{"unknown Message-ID", []string{"remove", "--data", dir, "--message-id", "<nobody@example.com>"}, 1, nil, []string{"no message in this archive has Message-ID <nobody@example.com>"}},
		{"removals before", []string{"removals", "--data", dir}, 0, nil, []string{"No message was removed"}},
		{"by Message-ID", []string{"remove", "--data", dir, "--reason", "spam", "--message-id", "<signed-1@example.com>"}, 0, []string{"removed " + n.String() + " on ", "A signed message"}, []string{"resolver compact"}},
		{"again", []string{"remove", "--data", dir, "--reason", "other", n.String()}, 0, []string{"removed " + n.String() + " on ", "removed already"}, nil},
		{"get", []string{"get", "--data", dir, n.String()}, 1, nil, []string{"message " + n.String() + " was removed from this archive on ", ": spam"}},
		{"inspect", []string{"inspect", "--data", dir, n.String()}, 0, []string{"removed.reason", "spam", "lease.nonce"}, nil},
		{"removals", []string{"removals", "--data", dir}, 0, []string{n.String(), "spam"}, nil},
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
	// JSON, as the API answers it.
	_, stdout, _ := runCmd(t, ctx, "removals", "--json", "--data", dir)
	var list []struct {
		CallNumber string    `json:"callnumber"`
		RemovedAt  time.Time `json:"removed_at"`
		Reason     string    `json:"reason"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list) != 1 || list[0].CallNumber != n.String() || list[0].Reason != "spam" || time.Since(list[0].RemovedAt) > time.Hour {
		t.Errorf("removals --json = %q, %v", stdout, err)
	}
	_, stdout, _ = runCmd(t, ctx, "inspect", "--json", "--data", dir, n.String())
	var in struct {
		Removed struct {
			Reason string `json:"reason"`
		} `json:"removed"`
		Run int `json:"run"`
	}
	if err := json.Unmarshal([]byte(stdout), &in); err != nil || in.Removed.Reason != "spam" || in.Run != 1 {
		t.Errorf("inspect --json of a removed message = %q, %v", stdout, err)
	}
}
