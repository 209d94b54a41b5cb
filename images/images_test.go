package images

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

// picture is a w × h picture with detail everywhere (noise compresses
// badly, as photos do); with alpha, its left half is transparent.
func picture(w, h int, alpha bool) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	seed := uint32(1)
	for y := range h {
		for x := range w {
			seed = seed*1664525 + 1013904223
			a := uint8(255)
			if alpha && x < w/2 {
				a = 0
			}
			img.SetNRGBA(x, y, color.NRGBA{uint8(seed >> 24), uint8(seed >> 16), uint8(x * y), a})
		}
	}
	return img
}

func encodePNG(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSniff(t *testing.T) {
	var jb, gb bytes.Buffer
	if err := jpeg.Encode(&jb, picture(4, 4, false), nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gb, picture(4, 4, false), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		data []byte
		want string
	}{
		{encodePNG(t, picture(4, 4, false)), PNG},
		{jb.Bytes(), JPEG},
		{gb.Bytes(), GIF},
		{[]byte("RIFF\x10\x00\x00\x00WEBPVP8 "), WebP},
		{[]byte("%PDF-1.7"), ""},
		{[]byte("<svg xmlns='http://www.w3.org/2000/svg'/>"), ""}, // scripts: never an image here
		{[]byte("RIFF\x10\x00\x00\x00WAVEfmt "), ""},
		{nil, ""},
	} {
		if got := Sniff(tc.data); got != tc.want {
			t.Errorf("Sniff(%q) = %q, want %q", tc.data[:min(len(tc.data), 12)], got, tc.want)
		}
	}
}

func TestFitKeepsWhatFits(t *testing.T) {
	data := encodePNG(t, picture(64, 48, false))
	out, mime, err := Fit(data, Limits{MaxEdge: 100, MaxBytes: 1 << 20})
	if err != nil || mime != PNG || !bytes.Equal(out, data) {
		t.Fatalf("a picture within the limits was changed: %s, %d bytes, %v", mime, len(out), err)
	}
}

func TestFitScalesDown(t *testing.T) {
	data := encodePNG(t, picture(1200, 600, false))
	lim := Limits{MaxEdge: 300, MaxBytes: 60_000}
	out, mime, err := Fit(data, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > lim.MaxBytes || mime != JPEG {
		t.Fatalf("got %s of %d bytes, want a JPEG within %d", mime, len(out), lim.MaxBytes)
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width > 300 || cfg.Width*10 < cfg.Height*19 || cfg.Width*10 > cfg.Height*21 {
		t.Fatalf("scaled to %d × %d, want at most 300 wide, 2:1", cfg.Width, cfg.Height)
	}
	// A GIF, animated or not, gives its first frame as a still picture.
	var gb bytes.Buffer
	pal := picture(40, 20, false)
	if err := gif.EncodeAll(&gb, &gif.GIF{Image: []*image.Paletted{paletted(pal, 0), paletted(pal, 255)}, Delay: []int{10, 10}}); err != nil {
		t.Fatal(err)
	}
	if out, mime, err := Fit(gb.Bytes(), Limits{MaxEdge: 100, MaxBytes: 1 << 20}); err != nil || mime == GIF || Sniff(out) != mime {
		t.Fatalf("an animated GIF became %s (%v)", mime, err)
	}

	// Transparency is kept: a PNG.
	out, mime, err = Fit(encodePNG(t, picture(800, 800, true)), Limits{MaxEdge: 200, MaxBytes: 1 << 20})
	if err != nil || mime != PNG {
		t.Fatalf("a transparent picture became %s (%v)", mime, err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, a := img.At(10, 100).RGBA(); a != 0 {
		t.Fatalf("the transparent half is opaque after scaling (alpha %d)", a)
	}
	if b := img.Bounds(); b.Dx() != 200 || b.Dy() != 200 {
		t.Fatalf("scaled to %v", b)
	}
}

func TestFitRefuses(t *testing.T) {
	if _, _, err := Fit([]byte("%PDF-1.7 not a picture"), ModelLimits()); !errors.Is(err, ErrNotImage) {
		t.Errorf("a PDF: %v", err)
	}
	if _, _, err := Fit([]byte("\x89PNG\r\n\x1a\ngarbage"), ModelLimits()); !errors.Is(err, ErrNotImage) {
		t.Errorf("a broken PNG: %v", err)
	}
	// A PNG header claiming 100,000 × 100,000 pixels, with none of them:
	// refused before a byte of pixels is allocated.
	var b bytes.Buffer
	if err := png.Encode(&b, picture(1, 1, false)); err != nil {
		t.Fatal(err)
	}
	bomb := b.Bytes()
	bomb[16], bomb[17], bomb[18], bomb[19] = 0, 1, 0x86, 0xa0 // width 100000
	bomb[20], bomb[21], bomb[22], bomb[23] = 0, 1, 0x86, 0xa0 // height 100000
	binary.BigEndian.PutUint32(bomb[29:33], crc32.ChecksumIEEE(bomb[12:29]))
	if _, _, err := Fit(bomb, ModelLimits()); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a picture declaring 10^10 pixels: %v", err)
	}
}

func FuzzFit(f *testing.F) {
	f.Add(encodePNG(f, picture(8, 8, true)))
	var jb bytes.Buffer
	_ = jpeg.Encode(&jb, picture(8, 8, false), nil)
	f.Add(jb.Bytes())
	var gb bytes.Buffer
	_ = gif.Encode(&gb, picture(8, 8, false), nil)
	f.Add(gb.Bytes())
	f.Add([]byte("RIFF\x10\x00\x00\x00WEBPVP8 "))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxEdge: 4, MaxBytes: 2048}
		out, mime, err := Fit(data, lim)
		if err != nil {
			return
		}
		if Sniff(out) != mime || len(out) > max(lim.MaxBytes, len(data)) {
			t.Fatalf("Fit gave %s of %d bytes, sniffed as %q", mime, len(out), Sniff(out))
		}
	})
}

// paletted is img in two colours: the first pixel's blue above level, black below.
func paletted(img *image.NRGBA, level uint8) *image.Paletted {
	p := image.NewPaletted(img.Bounds(), color.Palette{color.Black, color.White})
	for y := range img.Bounds().Dy() {
		for x := range img.Bounds().Dx() {
			if img.NRGBAAt(x, y).R >= level {
				p.SetColorIndex(x, y, 1)
			}
		}
	}
	return p
}

// A photo's worth of pixels halved, then scaled: what a person's phone
// picture costs before it goes to the model.
func BenchmarkScale(b *testing.B) {
	photo := image.NewRGBA(image.Rect(0, 0, 4032, 3024))
	for y := range 3024 {
		for x := range 4032 {
			photo.SetRGBA(x, y, color.RGBA{uint8(x / 16), uint8(y / 12), uint8((x + y) / 28), 255})
		}
	}
	for b.Loop() {
		scale(photo, 1568)
	}
}

// Halving averages: a checkerboard of black and white becomes grey, not
// one of the two (which skipping pixels would give).
func TestHalveAverages(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for y := range 4 {
		for x := range 4 {
			if (x+y)%2 == 0 {
				img.SetRGBA(x, y, color.RGBA{255, 255, 255, 255})
			} else {
				img.SetRGBA(x, y, color.RGBA{0, 0, 0, 255})
			}
		}
	}
	h := halve(img)
	if h.Rect.Dx() != 2 || h.Rect.Dy() != 2 {
		t.Fatalf("halved to %v", h.Rect)
	}
	if c := h.RGBAAt(1, 1); c.R != 128 || c.A != 255 {
		t.Fatalf("a checkerboard halved to %v, want grey", c)
	}
}
