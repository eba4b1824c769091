package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
)

// ErrUnauthorized: the coordinator refused the token.
var ErrUnauthorized = errors.New("coordinator: token refused")

// StatusError is an error response from the coordinator. It unwraps to
// ErrUnauthorized, authority.ErrNotIssued or authority.ErrExhausted.
type StatusError struct {
	StatusCode int
	Kind       string
	Message    string
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("coordinator answered %d: %s", e.StatusCode, msg)
}

// Unwrap returns the sentinel matching the response, if any.
func (e *StatusError) Unwrap() error {
	switch {
	case e.StatusCode == http.StatusUnauthorized:
		return ErrUnauthorized
	case e.Kind == KindExhausted:
		return authority.ErrExhausted
	case e.StatusCode == http.StatusNotFound && e.Kind == KindNotFound:
		return authority.ErrNotIssued
	}
	return nil
}

// ClientOptions configure a Client; zero values are defaults.
type ClientOptions struct {
	HTTPClient  *http.Client  // nil means a client of its own
	Timeout     time.Duration // of each attempt; 0 means 10 seconds
	MaxAttempts int           // in all; 0 means 5
	// MinBackoff, doubled for each further retry up to MaxBackoff, with
	// jitter; 0 means 100ms and 5 seconds.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	Logger     *slog.Logger // a line per retry; nil discards them
}

// Client takes runs from a coordinator over HTTP. Requests are retried
// after network errors, 5xx and 429, never after ctx ends. A retried POST
// whose first answer was lost wastes a run, but never hands one out twice:
// the authority returns each run to at most one attempt.
type Client struct {
	base   *url.URL
	token  string
	holder authority.Holder
	http   *http.Client
	opts   ClientOptions
	log    *slog.Logger
}

var _ callnumber.RunSource = (*Client)(nil)

// NewClient returns a client of the coordinator at baseURL, e.g.
// "http://127.0.0.1:7070", asking for runs on behalf of holder.
func NewClient(baseURL, token string, holder authority.Holder, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("cannot use coordinator URL %q: want http://host:port or https://host:port", baseURL)
	}
	if token == "" {
		return nil, errors.New("cannot use the coordinator: no token")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	c := &Client{base: u, token: token, holder: holder, http: opts.HTTPClient, opts: opts, log: opts.Logger}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 8
		c.http = &http.Client{Transport: t}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		c.log.Warn("the coordinator URL is plain http to another host: the token travels in clear", "url", u.Redacted())
	}
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewRun asks the coordinator for a new run (POST /v1/runs).
func (c *Client) NewRun(ctx context.Context) (callnumber.Lease, error) {
	body, err := json.Marshal(IssueRequest(c.holder))
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot ask for a run: %w", err)
	}
	var lease callnumber.Lease
	err = c.do(ctx, http.MethodPost, "/v1/runs", body, http.StatusCreated, func(r io.Reader) error {
		return json.NewDecoder(r).Decode(&lease)
	})
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot get a run from the coordinator: %w", err)
	}
	if err := lease.Validate(); err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot get a run from the coordinator: %w", err)
	}
	return lease, nil
}

// Lease returns the lease of run, or authority.ErrNotIssued.
func (c *Client) Lease(ctx context.Context, run uint32) (callnumber.Lease, error) {
	var lease callnumber.Lease
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+strconv.FormatUint(uint64(run), 10), nil, http.StatusOK, func(r io.Reader) error {
		return json.NewDecoder(r).Decode(&lease)
	})
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease %d from the coordinator: %w", run, err)
	}
	return lease, nil
}

// Backup streams a consistent copy of the coordinator's database to w and
// returns the authority ID announced. It is not retried: w may hold part
// of a copy after an error.
func (c *Client) Backup(ctx context.Context, w io.Writer) (id string, err error) {
	resp, err := c.attempt(ctx, http.MethodGet, "/v1/backup", nil)
	if err != nil {
		return "", fmt.Errorf("cannot back up through the coordinator: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cannot back up through the coordinator: %w", statusError(resp))
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("got %d bytes of %d", n, resp.ContentLength)
	}
	if err != nil {
		return "", fmt.Errorf("cannot back up through the coordinator: %w", err)
	}
	return resp.Header.Get(HeaderAuthority), nil
}

// BackupTo writes a backup to the file out atomically (see SaveBackup).
func (c *Client) BackupTo(ctx context.Context, out string) (id string, err error) {
	err = SaveBackup(ctx, out, "", func(w io.Writer) error {
		var err error
		id, err = c.Backup(ctx, w)
		return err
	})
	return id, err
}

// do hands the body of a response with status want to decode.
func (c *Client) do(ctx context.Context, method, path string, body []byte, want int, decode func(io.Reader) error) error {
	var last error
	for attempt := 1; ; attempt++ {
		retry, err := c.once(ctx, method, path, body, want, decode)
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			// Say that the caller gave up, as when it does during the wait.
			return fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
		}
		if !retry || attempt >= c.opts.MaxAttempts {
			if attempt > 1 {
				return fmt.Errorf("%w (after %d attempts)", last, attempt)
			}
			return last
		}
		wait := c.backoff(attempt)
		c.log.Warn("coordinator request failed; retrying", "method", method, "path", path,
			"attempt", attempt, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// backoff draws from the upper half of the doubled wait, so that clients
// failing together do not retry together.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.MaxBackoff
	if shift := attempt - 1; shift < 30 {
		if e := c.opts.MinBackoff << shift; e > 0 && e < d {
			d = e
		}
	}
	return d/2 + rand.N(d/2+1)
}

// once makes one attempt; retry says whether another may succeed.
func (c *Client) once(ctx context.Context, method, path string, body []byte, want int, decode func(io.Reader) error) (retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	resp, err := c.attempt(actx, method, path, body)
	if err != nil {
		// Worth retrying unless the caller has given up.
		return ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		err := statusError(resp)
		return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, err
	}
	if err := decode(io.LimitReader(resp.Body, 1<<20)); err != nil {
		// A body cut short is a network failure.
		return ctx.Err() == nil, fmt.Errorf("cannot read the answer: %w", err)
	}
	return false, nil
}

func (c *Client) attempt(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u := *c.base
	u.Path = c.base.Path + path
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.http.Do(req)
}

func statusError(resp *http.Response) *StatusError {
	e := &StatusError{StatusCode: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var body ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Kind, e.Message = body.Kind, body.Error
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}
