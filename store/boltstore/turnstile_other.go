//go:build !unix

package boltstore

// turnstile is a no-op where flock is missing: processes then share the
// database as bbolt alone allows (see turnstile_unix.go).
type turnstile struct{}

func openTurnstile(string) (*turnstile, error) { return &turnstile{}, nil }
func (*turnstile) tryEnter() (bool, error)     { return true, nil }
func (*turnstile) leave()                      {}
func (*turnstile) othersWaiting() bool         { return false }
func (*turnstile) seesWaiting() bool           { return false }
func (*turnstile) close() error                { return nil }
