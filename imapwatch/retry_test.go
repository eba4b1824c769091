package imapwatch

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
)

// nilBody is a connection that replaces the body of the message
// containing match in the server's FETCH answers by NIL, as a server does
// that cannot read a message from its own storage.
type nilBody struct {
	net.Conn
	match   []byte
	in, out []byte
	hits    *atomic.Int32
}

var bodyLiteral = []byte("BODY[] {")

func (c *nilBody) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		buf := make([]byte, 32<<10)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		c.process()
		if err != nil {
			c.out, c.in = append(c.out, c.in...), nil
			if len(c.out) == 0 {
				return 0, err
			}
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// process moves everything that cannot be part of a matching literal from
// in to out, rewriting a complete matching literal.
func (c *nilBody) process() {
	for {
		i := bytes.Index(c.in, bodyLiteral)
		if i < 0 {
			// Hold back only a tail that may be the start of the pattern.
			keep := len(c.in)
			for k := min(len(bodyLiteral)-1, len(c.in)); k > 0; k-- {
				if bytes.HasSuffix(c.in, bodyLiteral[:k]) {
					keep = len(c.in) - k
					break
				}
			}
			c.out, c.in = append(c.out, c.in[:keep]...), c.in[keep:]
			return
		}
		c.out, c.in = append(c.out, c.in[:i]...), c.in[i:]
		j := bytes.Index(c.in, []byte("}\r\n"))
		if j < 0 {
			return // the literal's size has not arrived yet
		}
		n, err := strconv.Atoi(string(c.in[len(bodyLiteral):j]))
		if err != nil {
			panic("nilBody: bad literal size " + string(c.in[:j]))
		}
		end := j + 3 + n
		if len(c.in) < end {
			return // the literal has not arrived yet
		}
		if bytes.Contains(c.in[j+3:end], c.match) {
			c.out = append(c.out, "BODY[] NIL"...)
			c.hits.Add(1)
		} else {
			c.out = append(c.out, c.in[:end]...)
		}
		c.in = c.in[end:]
	}
}

// A message the server fails to send is left in the mailbox, remembered in
// the state, and archived at the next connection; it never blocks the
// messages after it.
func TestRetryMessageWithoutBody(t *testing.T) {
	msgs := [][]byte{message(1), message(2), message(3)}
	addr, _ := memServer(t, nil, msgs...)
	a := newArchive(t)
	var hits atomic.Int32
	broken := func(o *Options) {
		d := &net.Dialer{}
		o.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &nilBody{Conn: conn, match: []byte("<m2@example.org>"), hits: &hits}, nil
		}
	}
	w := newTestWatcher(t, a, addr, broken)
	r := start(t, w)
	r.waitIdle(t)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if hits.Load() == 0 {
		t.Fatal("the server's answer was never rewritten: the test did not break anything")
	}
	if got := a.count(t); got != 2 {
		t.Fatalf("after a pass where message 2 had no body, the store holds %d messages, want 2", got)
	}
	st, err := LoadState(w.opts.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastUID != 3 || !slices.Equal(st.Retry, []uint32{2}) {
		t.Fatalf("state = %+v, want last UID 3 and UID 2 to retry", st)
	}

	// The next connection (here a new run) tries UID 2 again.
	w = newTestWatcher(t, a, addr, nil)
	r = start(t, w)
	r.waitIdle(t)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		a.checkStored(t, m)
	}
	if st, err = LoadState(w.opts.StatePath); err != nil || st.LastUID != 3 || len(st.Retry) != 0 {
		t.Errorf("state = %+v, %v; want last UID 3, nothing to retry", st, err)
	}
}

// A message over MaxMessageSize is read past without being held in
// memory, reported, and not retried (it would fail again); the others are
// archived.
func TestTooLarge(t *testing.T) {
	big := append(message(2)[:len(message(2))-2], bytes.Repeat([]byte("x"), 4000)...)
	big = append(big, "\r\n"...)
	msgs := [][]byte{message(1), big, message(3)}
	addr, _ := memServer(t, nil, msgs...)
	a := newArchive(t)
	w := newTestWatcher(t, a, addr, func(o *Options) { o.MaxMessageSize = 1000 })
	r := start(t, w)
	r.waitIdle(t)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := a.count(t); got != 2 {
		t.Errorf("store holds %d messages, want 2 (the large one refused)", got)
	}
	a.checkStored(t, message(1))
	a.checkStored(t, message(3))
	st, err := LoadState(w.opts.StatePath)
	if err != nil || st.LastUID != 3 || len(st.Retry) != 0 {
		t.Errorf("state = %+v, %v; want last UID 3 and nothing to retry", st, err)
	}
}
