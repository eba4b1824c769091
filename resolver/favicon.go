package resolver

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
)

// faviconICO is the site's icon: an envelope, drawn once at start-up and
// served as an ICO file holding one 32x32 PNG (which every browser since
// 2010 reads inside an ICO).
var faviconICO = func() []byte {
	const size = 32
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	blue := color.NRGBA{0x06, 0x45, 0xad, 0xff}
	white := color.NRGBA{0xff, 0xff, 0xff, 0xff}
	// The envelope: a blue body with a white border, and its flap.
	for y := 6; y < 26; y++ {
		for x := 2; x < 30; x++ {
			c := blue
			if x == 2 || x == 29 || y == 6 || y == 25 {
				c = white
			}
			img.SetNRGBA(x, y, c)
		}
	}
	for x := 3; x < 29; x++ {
		// Two lines from the top corners meeting in the middle.
		y := 7 + (min(x-3, 28-x) * 10 / 13)
		img.SetNRGBA(x, y, white)
		img.SetNRGBA(x, y+1, white)
	}
	var p bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		panic(err) // encoding an in-memory image cannot fail
	}
	var b bytes.Buffer
	// ICONDIR: reserved, type 1 (icon), one image.
	binary.Write(&b, binary.LittleEndian, [3]uint16{0, 1, 1})
	// ICONDIRENTRY: width, height, colours, reserved, planes, bits per
	// pixel, size of the image data, its offset.
	b.Write([]byte{size, size, 0, 0})
	binary.Write(&b, binary.LittleEndian, [2]uint16{1, 32})
	binary.Write(&b, binary.LittleEndian, [2]uint32{uint32(p.Len()), 6 + 16})
	b.Write(p.Bytes())
	return b.Bytes()
}()
