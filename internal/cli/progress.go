package cli

import (
	"io"
	"log/slog"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress reports how far a long job has come: a bar on a terminal, else a
// log line every LogEvery. It is not safe for concurrent use.
type Progress struct {
	w    io.Writer
	log  *slog.Logger
	term bool
	bar  *progressbar.ProgressBar
	name string // what the bar is for
	last time.Time
	unit string // what is counted; "" for bytes
}

// LogEvery is how often Progress logs when not on a terminal.
const LogEvery = 10 * time.Second

// NewProgress returns a Progress writing its bar to w or its lines to log.
func NewProgress(w io.Writer, log *slog.Logger) *Progress {
	return &Progress{w: w, log: log, term: IsTerminal(w), last: time.Now()}
}

// NewCountProgress is NewProgress for a count of things, not bytes.
func NewCountProgress(w io.Writer, log *slog.Logger, unit string) *Progress {
	p := NewProgress(w, log)
	p.unit = unit
	return p
}

// Update reports that done of total (0: unknown) of name are done; desc
// describes it on the bar, attrs on the log line.
func (p *Progress) Update(name, desc string, done, total int64, attrs ...any) {
	if !p.term {
		if time.Since(p.last) < LogEvery {
			return
		}
		p.last = time.Now()
		if p.unit != "" {
			p.log.Info("progress", append([]any{"of", name, "done", done, "total", total}, attrs...)...)
			return
		}
		p.log.Info("progress", append([]any{"path", name, "bytes_read", done, "bytes_total", total}, attrs...)...)
		return
	}
	if p.bar == nil || p.name != name {
		p.Finish()
		p.name = name
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200 * time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionFullWidth(), // the bar fits the terminal's line
		}
		if p.unit != "" {
			opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(p.unit))
		} else {
			opts = append(opts, progressbar.OptionShowBytes(true))
		}
		p.bar = progressbar.NewOptions64(max(total, -1), opts...)
	}
	p.bar.Describe(desc)
	p.bar.Set64(done)
}

// Finish clears the bar, so that what is written next starts a line.
func (p *Progress) Finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}
