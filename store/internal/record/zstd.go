package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression parameters. Only writers use them: they can change without a
// new record version.
const (
	// MaxPayload is the largest payload compressed, and the most a decoder
	// lets a frame decode to: a damaged size field must not allocate gigabytes.
	MaxPayload = 256 << 20
	// LargeMessage is the payload size from which a message is compressed
	// without the dictionary: a dictionary knows a small message's header
	// lines, but hardly matters to a patch series or an attachment.
	LargeMessage = 64 << 10
	// DictSize is the largest dictionary Train builds.
	DictSize = 112 << 10
	// MaxSample is the largest message Train learns from: attachments teach
	// a dictionary nothing, and the trainer's cost grows with them.
	MaxSample = 64 << 10
	// zstdDictID is the zstd dictionary ID of every dictionary, so frames
	// spend one byte on it: a record's header names its dictionary.
	zstdDictID = 1
)

// DictID names a dictionary: the first 8 bytes of the SHA-256 of its
// bytes, so that a dictionary read back is checked against its ID and two
// processes training the same bytes store one.
type DictID [dictIDLen]byte

// IDOf returns the ID of the dictionary b.
func IDOf(b []byte) DictID {
	sum := sha256.Sum256(b)
	return DictID(sum[:dictIDLen])
}

// String returns the ID in hex, as errors and logs show it.
func (id DictID) String() string { return hex.EncodeToString(id[:]) }

// ParseDictID reads an ID in hex.
func ParseDictID(s string) (DictID, error) {
	var id DictID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != dictIDLen {
		return DictID{}, fmt.Errorf("%w: dictionary ID %q is not %d hex digits", ErrCorrupt, s, 2*dictIDLen)
	}
	copy(id[:], b)
	return id, nil
}

// IsZero reports whether id is the zero ID, which names no dictionary.
func (id DictID) IsZero() bool { return id == DictID{} }

// Level is how hard a record is compressed. Readers need not know it.
type Level int

const (
	// Fastest is S2 for messages under LargeMessage (with the dictionary's
	// content), zstd's fastest level for larger ones: a bolt store's records
	// as messages arrive, until a compaction rewrites them at Strong.
	Fastest Level = iota
	// Fast is zstd's fastest level.
	Fast
	// Strong is zstd's "better" level: what a compaction writes, and a Riak
	// store, whose import the cluster rather than the importer's CPU bounds.
	Strong
)

// Dictionary is a zstd dictionary (RFC 8878 section 5), safe for
// concurrent use; its coders are created on first use.
type Dictionary struct {
	ID    DictID
	Bytes []byte

	decOnce sync.Once
	dec     *zstd.Decoder
	decErr  error
	encMu   sync.Mutex
	enc     [Strong + 1]*zstd.Encoder // nil until used, and once released
	s2Once  sync.Once
	s2      *s2.Dict // nil: its content is too small
}

// s2Dict returns the S2 dictionary of the last 64 KiB of d's content
// (where a trained dictionary keeps its best), or nil if there is too little.
func (d *Dictionary) s2Dict() *s2.Dict {
	d.s2Once.Do(func() {
		info, err := zstd.InspectDictionary(d.Bytes)
		if err != nil {
			return // NewDictionary checked it
		}
		d.s2 = s2.MakeDict(info.Content(), nil)
	})
	return d.s2
}

// NewDictionary checks that b is a zstd dictionary this package can use
// and returns it, keeping b. A stored one is read with CheckDictionary.
func NewDictionary(b []byte) (*Dictionary, error) {
	d := &Dictionary{ID: IDOf(b), Bytes: b}
	// The header says the zstd ID (RFC 8878 section 5); making the
	// decoder parses and checks the rest (zstd.InspectDictionary would
	// parse it all a second time: a tenth of a dictionary's first read).
	if len(b) < 8 || binary.LittleEndian.Uint32(b) != zstdDictMagic {
		return nil, fmt.Errorf("%w: dictionary %v: not a zstd dictionary", ErrCorrupt, d.ID)
	}
	if id := binary.LittleEndian.Uint32(b[4:]); id != zstdDictID {
		return nil, fmt.Errorf("%w: dictionary %v has zstd ID %d, want %d", ErrCorrupt, d.ID, id, zstdDictID)
	}
	if _, err := d.decoder(); err != nil {
		return nil, err
	}
	return d, nil
}

// CheckDictionary returns the Dictionary of b, in its stored form (see
// StoredDict), if it is the dictionary named id: a damaged or misnamed
// dictionary is refused before it can decode anything.
func CheckDictionary(id DictID, b []byte) (*Dictionary, error) {
	if bytes.HasPrefix(b, zstdMagic) {
		d, err := storedDictDecoder()
		if err != nil {
			return nil, err
		}
		if b, err = d.DecodeAll(b, nil); err != nil {
			return nil, fmt.Errorf("%w: the stored form of dictionary %v does not decode: %w", ErrCorrupt, id, err)
		}
	}
	if got := IDOf(b); got != id {
		return nil, fmt.Errorf("%w: the %d bytes stored as dictionary %v have ID %v: the dictionary is damaged", ErrCorrupt, len(b), id, got)
	}
	return NewDictionary(b)
}

func (d *Dictionary) decoder() (*zstd.Decoder, error) {
	d.decOnce.Do(func() {
		d.dec, d.decErr = zstd.NewReader(nil, decoderOptions(zstd.WithDecoderDicts(d.Bytes))...)
		if d.decErr != nil {
			d.decErr = fmt.Errorf("%w: dictionary %v: %w", ErrCorrupt, d.ID, d.decErr)
		}
	})
	return d.dec, d.decErr
}

func (d *Dictionary) encoder(l Level) (*zstd.Encoder, error) {
	l = max(l, Fast)
	d.encMu.Lock()
	defer d.encMu.Unlock()
	if d.enc[l] == nil {
		enc, err := zstd.NewWriter(nil, smallOptions(l, zstd.WithEncoderDict(d.Bytes))...)
		if err != nil {
			return nil, fmt.Errorf("cannot compress with dictionary %v: %w", d.ID, err)
		}
		d.enc[l] = enc
	}
	return d.enc[l], nil
}

// ReleaseEncoder lets go of the dictionary's encoders once nothing compresses
// with it any more; a later encoding makes a new one.
func (d *Dictionary) ReleaseEncoder() {
	d.encMu.Lock()
	defer d.encMu.Unlock()
	d.enc = [Strong + 1]*zstd.Encoder{}
}

// zstdDictMagic begins every zstd dictionary (RFC 8878 section 5).
const zstdDictMagic = 0xEC30A437

// zstdMagic begins every zstd frame (RFC 8878 section 3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// StoredDict returns the form a store keeps dictionary b in: a zstd frame
// (a dictionary is mostly text), or b itself if that is not smaller.
// CheckDictionary reads either.
func StoredDict(b []byte) []byte {
	enc, err := newDictEncoder()
	if err != nil {
		return b
	}
	if z := enc.EncodeAll(b, nil); len(z) < len(b) {
		return z
	}
	return b
}

var (
	dictCoders  sync.Once
	dictDec     *zstd.Decoder
	dictCodeErr error
)

func initDictCoders() {
	dictDec, dictCodeErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(4*DictSize))
}

// newDictEncoder returns an encoder for StoredDict. It is not kept: a
// store compresses a dictionary once in thousands of messages, and the
// encoder's tables are megabytes that an importer would otherwise hold
// for good (with zstd's default window of 8 MiB, 20 MiB of history
// buffers besides: TestStoredDictMemory). Its window is a dictionary's
// size, which loses nothing.
func newDictEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedBetterCompression),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(dictWindow),
		zstd.WithLowerEncoderMem(true),
	)
}

// dictWindow is the power of two from DictSize up.
const dictWindow = 128 << 10

func storedDictDecoder() (*zstd.Decoder, error) {
	dictCoders.Do(initDictCoders)
	return dictDec, dictCodeErr
}

// concurrency is how many records one coder works on at once: one per CPU,
// within reason, as each stronger encoder holds several MiB of tables.
func concurrency() int { return min(runtime.GOMAXPROCS(0), 16) }

func decoderOptions(more ...zstd.DOption) []zstd.DOption {
	return append([]zstd.DOption{
		zstd.WithDecoderConcurrency(concurrency()),
		zstd.WithDecoderMaxMemory(MaxPayload),
	}, more...)
}

func encoderOptions(level zstd.EncoderLevel, more ...zstd.EOption) []zstd.EOption {
	return append([]zstd.EOption{
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderCRC(false), // the digest covers the decoded bytes (but see largeOptions)
		// Huffman-code literals at the fastest level too: base64 attachments
		// shrink much more, at no cost in speed.
		zstd.WithAllLitEntropyCompression(true),
	}, more...)
}

// smallOptions are those of the encoders of messages under LargeMessage,
// with a small window: an encoder keeps a history of twice its window.
func smallOptions(l Level, more ...zstd.EOption) []zstd.EOption {
	level := zstd.SpeedFastest // Fastest, Fast
	switch l {
	case Strong:
		level = zstd.SpeedBetterCompression
	}
	return encoderOptions(level, append([]zstd.EOption{
		zstd.WithEncoderConcurrency(concurrency()),
		zstd.WithWindowSize(smallWindow),
		zstd.WithLowerEncoderMem(true),
	}, more...)...)
}

// largeOptions are those of the encoders of large messages: a 1 MiB window
// (an attachment has no matches further back), one at a time (they are
// few), and a checksum of the content, which readers check instead of the
// digest: it costs far less, and reading a message of many megabytes
// would otherwise spend most of its time on SHA-256.
func largeOptions(l Level) []zstd.EOption {
	level := zstd.SpeedDefault
	switch l {
	case Fastest:
		level = zstd.SpeedFastest
	case Strong:
		level = zstd.SpeedBetterCompression
	}
	return encoderOptions(level,
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<20),
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(true),
	)
}

// smallWindow is a power of two above LargeMessage and its fields.
const smallWindow = 2 * LargeMessage

// Codec writes and reads message records; the zero value is ready and safe
// for concurrent use. One per store: its coders hold buffers worth reusing.
type Codec struct {
	bufs    sync.Pool // *[]byte: payloads and their decoded copies
	decOnce sync.Once
	dec     *zstd.Decoder
	decErr  error
	encMu   sync.Mutex
	small   [Strong + 1]*zstd.Encoder // without a dictionary
	large   [Strong + 1]*zstd.Encoder // one per level
}

func (c *Codec) decoder() (*zstd.Decoder, error) {
	c.decOnce.Do(func() { c.dec, c.decErr = zstd.NewReader(nil, decoderOptions()...) })
	return c.dec, c.decErr
}

// encoders returns level l's encoders for small messages without a
// dictionary and for large ones.
func (c *Codec) encoders(l Level) (small, large *zstd.Encoder, err error) {
	c.encMu.Lock()
	defer c.encMu.Unlock()
	if c.small[l] == nil {
		if c.small[l], err = zstd.NewWriter(nil, smallOptions(l)...); err != nil {
			return nil, nil, err
		}
	}
	if c.large[l] == nil {
		if c.large[l], err = zstd.NewWriter(nil, largeOptions(l)...); err != nil {
			return nil, nil, err
		}
	}
	return c.small[l], c.large[l], nil
}

func (c *Codec) buffer(n int) *[]byte {
	if b, ok := c.bufs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, max(n, 64<<10))
	return &b
}

// release returns a buffer to the pool, unless it is large: a few large
// messages must not keep megabytes pooled.
func (c *Codec) release(b *[]byte) {
	if cap(*b) <= pooledBuffer {
		c.bufs.Put(b)
	}
}

// pooledBuffer is the largest buffer kept for reuse.
const pooledBuffer = 2 * LargeMessage

// ErrVerify: a compressed record does not decode to its message, a
// compressor bug caught before anything is stored; the caller can store
// the message uncompressed.
var ErrVerify = errors.New("store: compressed record does not decode to its message")

// Append appends the record of m to dst at level Fast (see AppendLevel).
func (c *Codec) Append(dst []byte, m Message, d *Dictionary) ([]byte, error) {
	return c.AppendLevel(dst, m, d, Fast)
}

// AppendLevel appends the record of m to dst: compressed (version 2) at
// level l, with d if given and m is under LargeMessage, or uncompressed
// (version 1) when that is not smaller. A compressed record is decoded and
// compared with m before it is returned, so what is stored reads back.
func (c *Codec) AppendLevel(dst []byte, m Message, d *Dictionary, l Level) ([]byte, error) {
	size := payloadSize(m)
	if size > MaxPayload {
		return AppendMessage(dst, m), nil
	}
	buf := c.buffer(size)
	defer c.release(buf)
	payload := appendPayload((*buf)[:0], m)
	*buf = payload
	small, large, err := c.encoders(l)
	if err != nil {
		return nil, fmt.Errorf("cannot set up zstd: %w", err)
	}
	enc, comp, id := small, Zstd, DictID{}
	var sd *s2.Dict
	switch {
	case size >= LargeMessage:
		enc = large
	case l == Fastest:
		comp = S2
		if d != nil {
			if sd = d.s2Dict(); sd != nil {
				comp, id = S2Dict, d.ID
			}
		}
	case d != nil:
		if enc, err = d.encoder(l); err != nil {
			return nil, err
		}
		comp, id = ZstdDict, d.ID
	}
	start := len(dst)
	if dst == nil {
		// Mail compresses to less than half; one growth for what does not.
		dst = make([]byte, 0, v2HeaderLen+dictIDLen+size/2+64)
	}
	dst = appendHeader2(dst, comp, id, m)
	frameAt := len(dst)
	switch comp {
	case S2, S2Dict:
		// S2 writes a block from the start of the slice it is given.
		out := c.buffer(s2.MaxEncodedLen(size))
		block := (*out)[:cap(*out)]
		if sd != nil {
			block = sd.Encode(block, payload)
		} else {
			block = s2.Encode(block, payload)
		}
		dst = append(dst, block...)
		*out = block
		c.release(out)
	default:
		dst = enc.EncodeAll(payload, dst)
	}
	if len(dst)-start >= v1HeaderLen+size {
		return AppendMessage(dst[:start], m), nil
	}
	if err := c.check(dst[frameAt:], payload, d, comp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVerify, err)
	}
	return dst, nil
}

func (c *Codec) check(frame, payload []byte, d *Dictionary, comp Compression) error {
	buf := c.buffer(len(payload))
	defer c.release(buf)
	got, err := decompress(c, frame, (*buf)[:0], d, comp)
	*buf = got
	if err != nil {
		return err
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("%d bytes decoded, %d bytes compressed", len(got), len(payload))
	}
	return nil
}

// decompress appends to dst the payload of a frame or block compressed
// as comp, with d if it names one.
func decompress(c *Codec, frame, dst []byte, d *Dictionary, comp Compression) ([]byte, error) {
	switch comp {
	case S2, S2Dict:
		n, err := s2.DecodedLen(frame)
		if err != nil {
			return nil, err
		}
		if n > MaxPayload {
			return nil, fmt.Errorf("an S2 block says it holds %d bytes, more than a record's payload can be", n)
		}
		if cap(dst)-len(dst) < n {
			dst = append(make([]byte, 0, len(dst)+n), dst...)
		}
		out := dst[len(dst) : len(dst)+n]
		var got []byte
		if comp == S2Dict {
			sd := d.s2Dict()
			if sd == nil {
				return nil, fmt.Errorf("dictionary %v has too little content for an S2 dictionary", d.ID)
			}
			got, err = sd.Decode(out, frame)
		} else {
			got, err = s2.Decode(out, frame)
		}
		if err != nil {
			return nil, err
		}
		return dst[:len(dst)+len(got)], nil
	}
	dec, err := c.decoder()
	if comp == ZstdDict {
		dec, err = d.decoder()
	}
	if err != nil {
		return nil, err
	}
	return dec.DecodeAll(frame, dst)
}

// Decode decodes a message record of any version and checks that it holds
// the message's bytes: against the zstd checksum its frame carries, if it
// does (large messages: see the package doc), else against its digest;
// dict, which may be nil, supplies the dictionary it names. Raw may alias b.
func (c *Codec) Decode(b []byte, dict func(DictID) (*Dictionary, error)) (Message, error) {
	return c.decode(b, dict, checkBytes)
}

// DecodeDigest is Decode checking the digest whatever the record, for a
// reader that vouches for each message's identity (a compaction, which
// writes every message anew).
func (c *Codec) DecodeDigest(b []byte, dict func(DictID) (*Dictionary, error)) (Message, error) {
	return c.decode(b, dict, checkDigest)
}

// What decode checks.
type check int

const (
	checkNothing check = iota // the caller has the raw bytes elsewhere
	checkBytes                // the frame's checksum where it has one, else the digest
	checkDigest               // the digest
)

func (c *Codec) decode(b []byte, dict func(DictID) (*Dictionary, error), what check) (Message, error) {
	h, p, err := ParseHeader(b)
	if err != nil {
		return Message{}, err
	}
	m := Message{Digest: h.Digest, Added: h.Added}
	if h.Version == Version2 {
		var d *Dictionary
		if h.Compression == ZstdDict || h.Compression == S2Dict {
			if dict == nil {
				return Message{}, fmt.Errorf("%w: the record is compressed with dictionary %v", ErrNoDictionary, h.Dict)
			}
			if d, err = dict(h.Dict); err == nil && d.ID != h.Dict {
				err = fmt.Errorf("asked for dictionary %v, got %v", h.Dict, d.ID)
			}
			if err != nil {
				return Message{}, fmt.Errorf("cannot decode a record compressed with dictionary %v: %w", h.Dict, err)
			}
		}
		// The decoder checks a frame's checksum as it decodes it.
		if what == checkBytes && (h.Compression == Zstd || h.Compression == ZstdDict) && hasChecksum(p) {
			what = checkNothing
		}
		if p, err = decompress(c, p, nil, d, h.Compression); err != nil {
			return Message{}, fmt.Errorf("%w: the %s payload does not decode: %w", ErrCorrupt, h.Compression, err)
		}
	}
	if err := decodePayload(&m, p); err != nil {
		return Message{}, err
	}
	if what != checkNothing {
		if err := verify(m, h); err != nil {
			return Message{}, err
		}
	}
	return m, nil
}

// hasChecksum reports whether frame, a zstd frame, says it ends with a
// checksum of its content (RFC 8878 section 3.1.1.1.1: the
// Content_Checksum_flag of the Frame_Header_Descriptor).
func hasChecksum(frame []byte) bool {
	return len(frame) > len(zstdMagic) && bytes.HasPrefix(frame, zstdMagic) && frame[len(zstdMagic)]&(1<<2) != 0
}

// Current is a store's current dictionary, which new records use.
type Current struct {
	// ID names the dictionary.
	ID DictID
	// Messages is how many messages the store held when it was trained.
	Messages int64
	// Samples is how many messages it was trained on.
	Samples int
	// Trained is when it was made current.
	Trained time.Time
}

type current struct {
	ID       string    `json:"id"`
	Messages int64     `json:"messages"`
	Samples  int       `json:"samples"`
	Trained  time.Time `json:"trained"`
}

// MarshalCurrent returns the JSON record of c.
func MarshalCurrent(c Current) []byte {
	out, err := json.Marshal(current{ID: c.ID.String(), Messages: c.Messages, Samples: c.Samples, Trained: c.Trained.UTC()})
	if err != nil {
		panic(err) // plain data always marshals
	}
	return out
}

// UnmarshalCurrent decodes a current-dictionary record.
func UnmarshalCurrent(b []byte) (Current, error) {
	var v current
	if err := json.Unmarshal(b, &v); err != nil {
		return Current{}, fmt.Errorf("%w: current dictionary: %w", ErrCorrupt, err)
	}
	id, err := ParseDictID(v.ID)
	if err != nil {
		return Current{}, fmt.Errorf("current dictionary: %w", err)
	}
	if id.IsZero() {
		return Current{}, fmt.Errorf("%w: current dictionary with the zero ID", ErrCorrupt)
	}
	return Current{ID: id, Messages: v.Messages, Samples: v.Samples, Trained: v.Trained}, nil
}
