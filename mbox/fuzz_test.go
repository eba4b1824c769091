package mbox

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

var fuzzFormats = []Format{FormatAuto, FormatMboxrd, FormatMboxo, FormatMboxcl, FormatMboxcl2}

// FuzzReader: reading never panics nor loops, in any format; messages come
// in input order, and within the size limit.
func FuzzReader(f *testing.F) {
	f.Add([]byte("From a@b Mon Jan  1 00:00:00 2001\nS: 1\n\n>From x\n\nFrom b@c Mon Jan  1 00:00:00 2001\nContent-Length: 3\n\nabc\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, fi uint8) {
		format := fuzzFormats[int(fi)%len(fuzzFormats)]
		const max = 1 << 10
		r := NewReader(bytes.NewReader(data), Options{Format: format, MaxMessageSize: max})
		lastLine := 0
		var lastOff int64 = -1
		for n := 0; ; n++ {
			if n > len(data)+2 {
				t.Fatalf("more results (%d) than input bytes (%d)", n, len(data))
			}
			m, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			var me *MessageError
			if errors.As(err, &me) {
				continue
			}
			if err != nil {
				t.Fatalf("fatal error on an in-memory input: %v", err)
			}
			if len(m.Raw) > max {
				t.Fatalf("message of %d bytes over the %d limit", len(m.Raw), max)
			}
			if m.Line <= lastLine || m.Offset <= lastOff {
				t.Fatalf("message at line %d offset %d after line %d offset %d", m.Line, m.Offset, lastLine, lastOff)
			}
			if !bytes.HasPrefix(data[m.Offset:], []byte(m.Separator)) {
				t.Fatalf("separator %q is not at offset %d", m.Separator, m.Offset)
			}
			lastLine, lastOff = m.Line, m.Offset
		}
	})
}

// FuzzMboxrdRoundTrip: messages read from any input, written with the
// Writer and read back, are the same messages; and the written mboxrd,
// read and written again, is reproduced byte for byte.
func FuzzMboxrdRoundTrip(f *testing.F) {
	f.Add([]byte("From a@b Mon Jan  1 00:00:00 2001\nS: 1\n\n>From x\n>>From y\nFrom z\n\n\nFrom b@c Mon Jan  1 00:00:00 2001\r\nS: 2\r\n\r\nb"))
	f.Fuzz(func(t *testing.T, data []byte) {
		type msg struct{ sep, raw string }
		read := func(in []byte) []msg {
			var out []msg
			r := NewReader(bytes.NewReader(in), Options{Format: FormatMboxrd})
			for {
				m, err := r.Next()
				if errors.Is(err, io.EOF) {
					return out
				}
				var me *MessageError
				if errors.As(err, &me) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, msg{m.Separator, string(m.Raw)})
			}
		}
		write := func(ms []msg) []byte {
			var b bytes.Buffer
			w := NewWriter(&b)
			for _, m := range ms {
				if err := w.WriteMessage(m.sep, []byte(m.raw)); err != nil {
					t.Fatalf("WriteMessage(%q, %q): %v", m.sep, m.raw, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}

		first := read(data)
		for i, m := range first {
			if err := WriteMboxrd(io.Discard, m.sep, nil); err != nil {
				first[i].sep = DefaultSeparator // e.g. the first From_ line of a file, accepted without a date
			}
		}
		out := write(first)
		second := read(out)
		if len(second) != len(first) {
			t.Fatalf("wrote %d messages, read back %d\nout: %q", len(first), len(second), out)
		}
		for i, m := range first {
			want := m.raw
			switch {
			case want == "" || want[len(want)-1] == '\n':
			case want[len(want)-1] == '\r':
				want += "\n"
			default:
				want += lineEnd([]byte(want))
			}
			if second[i].sep != m.sep || second[i].raw != want {
				t.Fatalf("message %d: read back %q %q, want %q %q\nout: %q", i, second[i].sep, second[i].raw, m.sep, want, out)
			}
		}
		if again := write(second); !bytes.Equal(again, out) {
			t.Fatalf("rewriting well-formed mboxrd\n%q\ngave\n%q", out, again)
		}
	})
}
