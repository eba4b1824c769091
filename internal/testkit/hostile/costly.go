package hostile

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"
)

// The costly cases: valid mail and searches that cost a reader far more
// than ordinary ones (Ordinary) if nothing bounds them.
const (
	// ManyReferencesCount is how many Message-IDs "many-references" names.
	ManyReferencesCount = 100_000
	// SoftBreaksSize is the size of "soft-breaks".
	SoftBreaksSize = 40 << 20
	// BigPatchSize is about the size of "big-patch".
	BigPatchSize = 40 << 20
	// BigAttachmentSize is decoded.
	BigAttachmentSize = 44 << 20
	// LongPhraseWords is how many words LongPhrase has by default.
	LongPhraseWords = 499
)

// Epoch is the date of the first message; the others follow a minute apart.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func dateField(minute int) string {
	return "Date: " + Epoch.Add(time.Duration(minute)*time.Minute).Format(time.RFC1123Z) + "\n"
}

// Ordinary returns the baseline: a short reply to parent ("" for none), at
// minute after Epoch.
func Ordinary(name, parent string, minute int) Message {
	header := "From: Ada <ada@example.org>\nSubject: Re: an ordinary question\n" + dateField(minute)
	if parent != "" {
		header += "In-Reply-To: <" + parent + ">\nReferences: <" + parent + ">\n"
	}
	return plain(name, "an ordinary reply: a few lines of text", header+"Content-Type: text/plain; charset=utf-8\n",
		"I think eight characters would do.\n\n> Should every message get a short, permanent number?\n\n-- \nAda\n")
}

// Threads returns n threads of 1+replies messages, each reply answering the
// one before it (Message-IDs thread-T-M@hostile.test).
func Threads(n, replies int) []Message {
	var out []Message
	minute := 0
	for t := range n {
		var refs []string
		for m := range replies + 1 {
			id := fmt.Sprintf("thread-%d-%d@hostile.test", t, m)
			header := fmt.Sprintf("From: Member %d <m%d@example.org>\nSubject: %stopic %d\n", m, m, strings.Repeat("Re: ", min(m, 1)), t) + dateField(minute)
			if len(refs) > 0 {
				header += "In-Reply-To: <" + refs[len(refs)-1] + ">\nReferences: <" + strings.Join(refs, "> <") + ">\n"
			}
			out = append(out, plain(strings.TrimSuffix(id, "@hostile.test"), "an ordinary message of an ordinary thread", header, fmt.Sprintf("message %d of thread %d\n", m, t)))
			refs = append(refs, id)
			minute++
		}
	}
	return out
}

// ManyReferences returns "many-references": a reply whose References name
// n Message-IDs that no archive holds, one per folded line.
func ManyReferences(n int) Message {
	var b strings.Builder
	b.WriteString("From: Mallory <mallory@example.org>\nSubject: Re: many references\n" + dateField(0))
	fmt.Fprintf(&b, "In-Reply-To: <ref-%d@hostile.test>\nReferences:", n-1)
	for i := range n {
		fmt.Fprintf(&b, " <ref-%d@hostile.test>\n", i)
	}
	m := plain("many-references", fmt.Sprintf("a reply naming %d Message-IDs in References", n),
		b.String()+"Content-Type: text/plain\n", "a reply with a long ancestry\n")
	return m
}

// NamesAll returns "names-all": a reply whose References name all ids, one
// message that would join every thread of a list.
func NamesAll(ids []string, minute int) Message {
	var b strings.Builder
	b.WriteString("From: Mallory <mallory@example.org>\nSubject: Re: everything\n" + dateField(minute))
	if len(ids) > 0 {
		b.WriteString("In-Reply-To: <" + ids[len(ids)-1] + ">\nReferences:")
		for _, id := range ids {
			b.WriteString(" <" + id + ">\n")
		}
	}
	return plain("names-all", fmt.Sprintf("a reply whose References name all %d Message-IDs of a list", len(ids)),
		b.String()+"Content-Type: text/plain\n", "one reply to everyone\n")
}

// SoftBreaks returns "soft-breaks": size bytes of quoted-printable soft line
// breaks (RFC 2045 section 6.7, rule 5), which decode to nothing.
func SoftBreaks(size int64) Message {
	id := "soft-breaks@hostile.test"
	head := "Message-ID: <" + id + ">\nFrom: Mallory <mallory@example.org>\nSubject: soft line breaks\n" + dateField(0) +
		"MIME-Version: 1.0\nContent-Type: text/plain; charset=us-ascii\nContent-Transfer-Encoding: quoted-printable\n\nvisible text=\n"
	tail := "\nthe end\n"
	return generated("soft-breaks", id, fmt.Sprintf("a %d-byte quoted-printable part of soft line breaks", size), size, func(w io.Writer) error {
		left := size - int64(len(head)) - int64(len(tail))
		if _, err := io.WriteString(w, head); err != nil {
			return err
		}
		if left%2 == 1 {
			if _, err := io.WriteString(w, "x"); err != nil {
				return err
			}
			left--
		}
		if err := repeat(w, []byte("=\n"), left); err != nil {
			return err
		}
		_, err := io.WriteString(w, tail)
		return err
	})
}

// BigPatch returns "big-patch": a patch of size bytes, one file whose
// single hunk adds line after line, for the cost of colouring a patch,
// counting its diffstat and indexing the paths it touches. It is
// generated as it is written.
func BigPatch(size int64) Message {
	id := "big-patch@hostile.test"
	const line = "+\tadded_line(\"a line that a big patch adds, again\");\n"
	lines := size / int64(len(line))
	head := "Message-ID: <" + id + ">\nFrom: Mallory <mallory@example.org>\nSubject: [PATCH] a big patch\n" + dateField(0) +
		"MIME-Version: 1.0\nContent-Type: text/plain; charset=us-ascii\n\nA patch.\n---\n" +
		"diff --git a/drivers/big.c b/drivers/big.c\n--- a/drivers/big.c\n+++ b/drivers/big.c\n" +
		fmt.Sprintf("@@ -1,0 +1,%d @@\n", lines)
	tail := "-- \n2.39.2\n"
	total := int64(len(head)) + lines*int64(len(line)) + int64(len(tail))
	return generated("big-patch", id, fmt.Sprintf("a %d-byte patch adding %d lines to one file", total, lines), total, func(w io.Writer) error {
		if _, err := io.WriteString(w, head); err != nil {
			return err
		}
		if err := repeat(w, []byte(line), lines*int64(len(line))); err != nil {
			return err
		}
		_, err := io.WriteString(w, tail)
		return err
	})
}

// BigAttachment returns "big-attachment": a short text and one base64
// attachment of size bytes (see AttachmentByte).
func BigAttachment(size int64) Message {
	id := "big-attachment@hostile.test"
	head := "Message-ID: <" + id + ">\nFrom: Ada <ada@example.org>\nSubject: a big attachment\n" + dateField(0) +
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n" +
		"--b\nContent-Type: text/plain\n\nThe file is attached.\n" +
		"--b\nContent-Type: application/octet-stream; name=\"big.bin\"\nContent-Disposition: attachment; filename=\"big.bin\"\nContent-Transfer-Encoding: base64\n\n"
	tail := "--b--\n"
	// A line of base64 is 57 bytes decoded (RFC 2045 section 6.8: at most
	// 76 characters).
	block := make([]byte, 57)
	for i := range block {
		block[i] = AttachmentByte(int64(i))
	}
	line := []byte(base64.StdEncoding.EncodeToString(block) + "\n")
	full, rest := size/57, size%57
	var last []byte
	if rest > 0 {
		last = []byte(base64.StdEncoding.EncodeToString(block[:rest]) + "\n")
	}
	total := int64(len(head)) + full*int64(len(line)) + int64(len(last)) + int64(len(tail))
	return generated("big-attachment", id, fmt.Sprintf("an attachment of %d bytes, base64", size), total, func(w io.Writer) error {
		if _, err := io.WriteString(w, head); err != nil {
			return err
		}
		if err := repeat(w, line, full*int64(len(line))); err != nil {
			return err
		}
		if _, err := w.Write(last); err != nil {
			return err
		}
		_, err := io.WriteString(w, tail)
		return err
	})
}

// AttachmentByte is the byte at offset i of BigAttachment's attachment.
func AttachmentByte(i int64) byte { return byte(i % 57 * 4) }

// LongPhrase returns a query of one quoted phrase of n one-letter words.
func LongPhrase(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = string(rune('a' + i%26))
	}
	return `"` + strings.Join(words, " ") + `"`
}

// generated returns a message of size bytes written by gen.
func generated(name, id, why string, size int64, gen func(io.Writer) error) Message {
	return Message{Name: name, Why: why, size: size, MessageID: id, gen: gen}
}

// repeat writes n bytes of repetitions of unit (n a multiple of its length).
func repeat(w io.Writer, unit []byte, n int64) error {
	buf := bytes.Repeat(unit, max(1, (64<<10)/len(unit)))
	for n > 0 {
		chunk := buf
		if int64(len(chunk)) > n {
			chunk = chunk[:n]
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		n -= int64(len(chunk))
	}
	return nil
}
