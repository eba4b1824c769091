package store

import "errors"

// ErrInvalidMessage: a message given to Put has a Digest that is not
// DigestOf(Raw), or a call number that does not decode under the store's
// authority. Nothing of the batch is written.
var ErrInvalidMessage = errors.New("store: invalid message")
