package store

import "errors"

// ErrInvalidMessage: a message given to Put is malformed: its Digest is
// not DigestOf(Raw), or its call number does not decode under the store's
// authority. Nothing of the batch is written.
//
// (Added beside the sentinels of store.go by the backends' author: Put
// checks every message before writing, and a caller must be able to tell a
// bad message from a refused one.)
var ErrInvalidMessage = errors.New("store: invalid message")
