package riakstore

import (
	"bytes"
	"time"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Values of pack format version 1, which archives written before
// compressed records hold, frozen in testdata/ (written by the version 1
// encoder, which is gone): every later reader must read them as they are.
//
//	pack-v1.bin        pack 0.R.1, DEFLATE: sequences 16 to 20, 19 a large
//	                   message's stub
//	large-v1.bin       the large message of sequence 19, DEFLATE
//	pack-v1-plain.bin  pack 0.R.2, stored as is (compression 0): sequence
//	                   32, bytes that do not deflate

// v1Added is when the version 1 fixtures say their messages were added.
var v1Added = time.Date(2025, 11, 3, 10, 20, 30, 123456789, time.UTC)

// v1Message is a message of the version 1 fixtures.
type v1Message struct {
	seq       uint16
	messageID string
	list      string
	raw       []byte
}

func (m v1Message) record() record.Message {
	return record.Message{Digest: store.DigestOf(m.raw), Added: v1Added, MessageID: m.messageID, List: m.list, Raw: m.raw}
}

// v1Messages are the messages of pack-v1.bin (with large-v1.bin) and of
// pack-v1-plain.bin.
func v1Messages() (packed, plain []v1Message) {
	big := []byte("From: Big <big@example.org>\nSubject: a patch with a large attachment\nMessage-ID: <big@example.org>\n\n")
	for i := 0; len(big) <= largeMessage; i++ {
		big = append(big, []byte("+\tline of the attachment, number "+string(rune('0'+i%10))+"\n")...)
	}
	noise := make([]byte, 300)
	x := uint32(2463534242)
	for i := range noise {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		noise[i] = byte(x)
	}
	packed = []v1Message{
		{16, "one@example.org", "linux-mips", []byte("From: One <one@example.org>\nTo: linux-mips@linux-mips.org\nSubject: [PATCH] MIPS: one\nMessage-ID: <one@example.org>\n\nThe first message.\n")},
		{17, "two@example.org", "linux-mips", []byte("From: Two <two@example.org>\r\nSubject: Re: [PATCH] MIPS: one\r\nMessage-ID: <two@example.org>\r\nIn-Reply-To: <one@example.org>\r\n\r\nCRLF line ends.\r\n")},
		{18, "", "", []byte("From: nobody\nSubject: no Message-ID, no list\n\n>From quoted, kept as is\n")},
		{19, "big@example.org", "linux-mips", big},
		{20, "eight@example.org", "linux-mips", bytes.Join([][]byte{[]byte("From: =?ISO-8859-1?Q?J=F6rg?= <j@example.org>\nSubject: 8-bit \xe4\xf6\xfc\nMessage-ID: <eight@example.org>\n\n"), []byte("Gr\xfc\xdfe\n")}, nil)},
	}
	plain = []v1Message{{32, "noise@example.org", "", append([]byte("Subject: noise\n\n"), noise...)}}
	return packed, plain
}
