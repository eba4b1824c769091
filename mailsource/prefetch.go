package mailsource

import (
	"io"
	"sync"
)

// prefetcher reads ahead of its consumer in a goroutine it owns, holding at
// most n chunks of chunk bytes.
type prefetcher struct {
	full chan []byte
	free chan []byte
	done chan struct{}
	wg   sync.WaitGroup
	err  error // set by the goroutine before it closes full

	cur, held []byte
	closeOnce sync.Once
}

func newPrefetcher(r io.Reader, chunk, n int) *prefetcher {
	p := &prefetcher{
		full: make(chan []byte, n),
		free: make(chan []byte, n),
		done: make(chan struct{}),
	}
	for range n {
		p.free <- make([]byte, chunk)
	}
	p.wg.Add(1)
	go p.run(r)
	return p
}

func (p *prefetcher) run(r io.Reader) {
	defer p.wg.Done()
	defer close(p.full)
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.done:
			p.err = io.ErrClosedPipe
			return
		}
		n, err := fill(r, buf)
		if n > 0 {
			select {
			case p.full <- buf[:n]:
			case <-p.done:
				p.err = io.ErrClosedPipe
				return
			}
		}
		if err != nil {
			p.err = err
			return
		}
	}
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.held != nil {
			p.free <- p.held[:cap(p.held)]
			p.held = nil
		}
		buf, ok := <-p.full
		if !ok {
			return 0, p.err
		}
		p.cur, p.held = buf, buf
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// fill is io.ReadFull that returns r's error as it is: io.ErrUnexpectedEOF
// only when r says so (a cut-short compressed stream).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close stops the reading goroutine and waits for it. It does not close
// the underlying reader.
func (p *prefetcher) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	p.wg.Wait()
	return nil
}
