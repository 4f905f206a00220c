package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// The drawing surface of one chart: a white image, three faces, and a
// record of every text drawn and where, so tests can prove no two overlap.

const (
	chartW = 900
	chartH = 500
)

// Everything but the series is drawn in greys, which no palette colour
// equals: a pixel of a series' colour is always part of that series.
type grey uint8

func (g grey) RGBA() (uint32, uint32, uint32, uint32) {
	v := uint32(g) * 0x101
	return v, v, v, 0xffff
}

const (
	inkTitle grey = 0x22
	inkText  grey = 0x33
	inkAxis  grey = 0x55
	inkNote  grey = 0x66
	inkGrid  grey = 0xe4
	inkMinor grey = 0xf2
)

type canvas struct {
	img    *image.RGBA
	big    font.Face // the title
	body   font.Face // axis labels, tick labels, legend
	small  font.Face // bar values, notes
	z      *vector.Rasterizer
	shapes [][]point   // polygons waiting for paint
	texts  []drawnText // every text drawn
}

// A drawnText is a string drawn on a canvas and the box it took.
type drawnText struct {
	s   string
	box image.Rectangle
}

func newCanvas() (*canvas, error) {
	plain, err := opentype.Parse(goregular.TTF)
	if err != nil {
		return nil, fmt.Errorf("parse font: %w", err)
	}
	bold, err := opentype.Parse(gobold.TTF)
	if err != nil {
		return nil, fmt.Errorf("parse font: %w", err)
	}
	face := func(f *opentype.Font, px float64) (font.Face, error) {
		// At 72 DPI a point is a pixel; full hinting keeps small text crisp.
		return opentype.NewFace(f, &opentype.FaceOptions{Size: px, DPI: 72, Hinting: font.HintingFull})
	}
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, chartW, chartH)), z: vector.NewRasterizer(1, 1)}
	if c.big, err = face(bold, 17); err != nil {
		return nil, fmt.Errorf("font face: %w", err)
	}
	if c.body, err = face(plain, 13); err != nil {
		return nil, fmt.Errorf("font face: %w", err)
	}
	if c.small, err = face(plain, 11); err != nil {
		return nil, fmt.Errorf("font face: %w", err)
	}
	draw.Draw(c.img, c.img.Bounds(), image.White, image.Point{}, draw.Src)
	return c, nil
}

func (c *canvas) writePNG(path string) error {
	var b bytes.Buffer
	if err := png.Encode(&b, c.img); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

func textWidth(f font.Face, s string) int { return font.MeasureString(f, s).Ceil() }

func lineHeight(f font.Face) int {
	m := f.Metrics()
	return (m.Ascent + m.Descent).Ceil()
}

// text draws s with its box's top-left corner at (x, y).
func (c *canvas) text(f font.Face, s string, x, y int, ink color.Color) {
	if s == "" {
		return
	}
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(ink), Face: f,
		Dot: fixed.P(x, y+f.Metrics().Ascent.Ceil())}
	d.DrawString(s)
	c.texts = append(c.texts, drawnText{s, image.Rect(x, y, x+textWidth(f, s), y+lineHeight(f))})
}

// textCentered draws s centred on x, its top at y.
func (c *canvas) textCentered(f font.Face, s string, x, y int, ink color.Color) {
	c.text(f, s, x-textWidth(f, s)/2, y, ink)
}

// textUp draws s turned a quarter left (reading bottom to top) with its
// box's top-left corner at (x, y): the box is lineHeight wide and as tall
// as the text is long.
func (c *canvas) textUp(f font.Face, s string, x, y int, ink color.Color) {
	if s == "" {
		return
	}
	w, h := textWidth(f, s), lineHeight(f)
	flat := image.NewRGBA(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: flat, Src: image.NewUniform(ink), Face: f, Dot: fixed.P(0, f.Metrics().Ascent.Ceil())}
	d.DrawString(s)
	up := image.NewRGBA(image.Rect(0, 0, h, w))
	for fy := range h {
		for fx := range w {
			up.SetRGBA(fy, w-1-fx, flat.RGBAAt(fx, fy))
		}
	}
	r := image.Rect(x, y, x+h, y+w)
	draw.Draw(c.img, r, up, image.Point{}, draw.Over)
	c.texts = append(c.texts, drawnText{s, r})
}

// shorten cuts s to fit max pixels, ending it with an ellipsis; "" when
// not even the ellipsis fits.
func shorten(f font.Face, s string, max int) string {
	if textWidth(f, s) <= max {
		return s
	}
	for s != "" {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
		if t := strings.TrimRight(s, " ") + "…"; textWidth(f, t) <= max {
			return t
		}
	}
	if textWidth(f, "…") <= max {
		return "…"
	}
	return ""
}

// wrap breaks s at spaces into at most maxLines lines of max pixels; a
// word too long for a line, or what does not fit in the last line, is
// shortened.
func wrap(f font.Face, s string, max, maxLines int) []string {
	words := strings.Fields(s)
	var lines []string
	for len(words) > 0 {
		if len(lines) == maxLines-1 {
			lines = append(lines, shorten(f, strings.Join(words, " "), max))
			break
		}
		n := 1
		for n < len(words) && textWidth(f, strings.Join(words[:n+1], " ")) <= max {
			n++
		}
		lines = append(lines, shorten(f, strings.Join(words[:n], " "), max))
		words = words[n:]
	}
	return lines
}

func (c *canvas) fill(r image.Rectangle, ink color.Color) {
	draw.Draw(c.img, r, image.NewUniform(ink), image.Point{}, draw.Src)
}

type point struct{ x, y float64 }

// path adds a closed polygon to those the next paint fills.
func (c *canvas) path(pts []point) { c.shapes = append(c.shapes, pts) }

// paint fills, anti-aliased, every polygon added since the last paint.
// The rasterizer covers only their bounding box: a marker costs its few
// pixels, not the whole image.
func (c *canvas) paint(ink color.Color) {
	box := image.Rectangle{}
	for _, pts := range c.shapes {
		for _, p := range pts {
			box = box.Union(image.Rect(int(math.Floor(p.x))-1, int(math.Floor(p.y))-1, int(math.Ceil(p.x))+1, int(math.Ceil(p.y))+1))
		}
	}
	box = box.Intersect(c.img.Bounds())
	if !box.Empty() {
		c.z.Reset(box.Dx(), box.Dy())
		for _, pts := range c.shapes {
			c.polygon(pts, box.Min)
		}
		c.z.Draw(c.img, box, image.NewUniform(ink), image.Point{})
	}
	c.shapes = c.shapes[:0]
}

// polygon adds pts, moved by -at, to the rasterizer's path. Polygons are
// all wound the same way so that where two overlap the coverage saturates
// rather than cancelling (the rasterizer sums signed areas).
func (c *canvas) polygon(pts []point, at image.Point) {
	area := 0.0
	for i, p := range pts {
		q := pts[(i+1)%len(pts)]
		area += p.x*q.y - q.x*p.y
	}
	if area > 0 {
		pts = reversed(pts)
	}
	ox, oy := float64(at.X), float64(at.Y)
	c.z.MoveTo(float32(pts[0].x-ox), float32(pts[0].y-oy))
	for _, p := range pts[1:] {
		c.z.LineTo(float32(p.x-ox), float32(p.y-oy))
	}
	c.z.ClosePath()
}

func reversed(pts []point) []point {
	r := make([]point, len(pts))
	for i, p := range pts {
		r[len(pts)-1-i] = p
	}
	return r
}

// polyline strokes pts with round joins.
func (c *canvas) polyline(pts []point, width float64, ink color.Color) {
	h := width / 2
	for i, p := range pts {
		c.path(regular(p, h, 16, 0))
		if i == 0 {
			continue
		}
		q := pts[i-1]
		dx, dy := p.x-q.x, p.y-q.y
		l := math.Hypot(dx, dy)
		if l == 0 {
			continue
		}
		nx, ny := -dy/l*h, dx/l*h
		c.path([]point{{q.x + nx, q.y + ny}, {p.x + nx, p.y + ny}, {p.x - nx, p.y - ny}, {q.x - nx, q.y - ny}})
	}
	c.paint(ink)
}

// regular is an n-sided regular polygon of circumradius r around p, its
// first vertex at angle a (radians, 0 pointing right, y down).
func regular(p point, r float64, n int, a float64) []point {
	pts := make([]point, n)
	for i := range pts {
		t := a + 2*math.Pi*float64(i)/float64(n)
		pts[i] = point{p.x + r*math.Cos(t), p.y + r*math.Sin(t)}
	}
	return pts
}

// marker is the shape series i's points are drawn with, so that lines stay
// apart for readers who cannot tell the colours apart.
func marker(i int, p point, r float64) []point {
	switch i % 8 {
	case 0: // circle
		return regular(p, r, 20, 0)
	case 1: // square
		return regular(p, r*1.2, 4, math.Pi/4)
	case 2: // triangle
		return regular(p, r*1.35, 3, -math.Pi/2)
	case 3: // diamond
		return regular(p, r*1.3, 4, 0)
	case 4: // triangle pointing down
		return regular(p, r*1.35, 3, math.Pi/2)
	case 5: // plus
		return cross(p, r*1.3, r*0.45, 0)
	case 6: // x
		return cross(p, r*1.3, r*0.45, math.Pi/4)
	default: // star
		pts := make([]point, 10)
		for k := range pts {
			rr := r * 1.4
			if k%2 == 1 {
				rr = r * 0.6
			}
			t := -math.Pi/2 + math.Pi*float64(k)/5
			pts[k] = point{p.x + rr*math.Cos(t), p.y + rr*math.Sin(t)}
		}
		return pts
	}
}

// cross is a plus of arm length r and half-thickness t, turned by a.
func cross(p point, r, t, a float64) []point {
	arm := []point{{t, t}, {r, t}, {r, -t}, {t, -t}, {t, -r}, {-t, -r}, {-t, -t}, {-r, -t}, {-r, t}, {-t, t}, {-t, r}, {t, r}}
	sin, cos := math.Sincos(a)
	pts := make([]point, len(arm))
	for i, q := range arm {
		pts[i] = point{p.x + q.x*cos - q.y*sin, p.y + q.x*sin + q.y*cos}
	}
	return pts
}

// drawMarker draws series i's marker with a white rim, so it stands out
// on lines crossing it.
func (c *canvas) drawMarker(i int, p point, ink color.Color) {
	c.path(marker(i, p, 5.5))
	c.paint(color.White)
	c.path(marker(i, p, 4))
	c.paint(ink)
}
