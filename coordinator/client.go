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
// ErrUnauthorized (401), authority.ErrNotIssued (404 for a run) and
// authority.ErrExhausted (the run space is used up), so callers can test
// with errors.Is.
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

// ClientOptions configure a Client. The zero value is the default for
// every field.
type ClientOptions struct {
	// HTTPClient makes the requests; nil means a client of its own. Its
	// Timeout, if any, applies on top of Timeout below.
	HTTPClient *http.Client
	// Timeout bounds each attempt; 0 means 10 seconds.
	Timeout time.Duration
	// MaxAttempts is how many times a request is tried in all; 0 means 5.
	MaxAttempts int
	// MinBackoff is the wait before the first retry, doubled for each
	// further one up to MaxBackoff, with random jitter; 0 means 100ms.
	MinBackoff time.Duration
	// MaxBackoff caps the wait between attempts; 0 means 5 seconds.
	MaxBackoff time.Duration
	// Logger receives a line per retry; nil discards them. The token is
	// never logged.
	Logger *slog.Logger
}

// Client takes runs from a coordinator over HTTP: a callnumber.RunSource
// for processes on other machines than the authority's file.
//
// Requests are retried, with exponential backoff and jitter, after network
// errors and 5xx responses, never after other 4xx ones, and never after ctx
// ends. A retried POST may issue a second run when the first attempt was
// committed but its answer lost: that wastes a run, it never hands out one
// twice, since each run is issued once by the authority and returned to
// at most one attempt.
type Client struct {
	base   *url.URL
	token  string
	holder authority.Holder
	http   *http.Client
	opts   ClientOptions
	log    *slog.Logger
}

var _ callnumber.RunSource = (*Client)(nil)

// NewClient returns a client of the coordinator at baseURL (http or
// https, e.g. "http://127.0.0.1:7070"), presenting token and asking for
// runs on behalf of holder.
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

// Lease returns the lease of run as the coordinator recorded it (GET
// /v1/runs/{run}); authority.ErrNotIssued if it never issued it.
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

// Backup streams a consistent copy of the coordinator's database to w
// (GET /v1/backup) and returns the authority ID the coordinator announced.
// It is not retried: w may hold part of a copy after an error.
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

// BackupTo writes a backup taken through the coordinator to the file out,
// atomically (see SaveBackup), and returns the authority ID of the copy.
func (c *Client) BackupTo(ctx context.Context, out string) (id string, err error) {
	err = SaveBackup(ctx, out, "", func(w io.Writer) error {
		var err error
		id, err = c.Backup(ctx, w)
		return err
	})
	return id, err
}

// do sends a request, retrying as documented on Client, and hands the body
// of a response with status want to decode.
func (c *Client) do(ctx context.Context, method, path string, body []byte, want int, decode func(io.Reader) error) error {
	var last error
	for attempt := 1; ; attempt++ {
		retry, err := c.once(ctx, method, path, body, want, decode)
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			// The caller's end came as the attempt failed otherwise:
			// say so, as when it comes during the wait below.
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

// backoff returns the wait after the given failed attempt: MinBackoff
// doubled per attempt, capped at MaxBackoff, drawn uniformly from its
// upper half so that clients failing together do not retry together.
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
		// Network errors and the attempt's own timeout are worth
		// retrying; the caller's end is not.
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

// statusError reads an error response.
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
