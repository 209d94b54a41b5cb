package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"slices"
	"strings"
	"time"

	gws "github.com/gorilla/websocket"

	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
)

// The files rows: what a picture a person sends costs a turn, through the
// gateway binary over /ws against a scripted model in this process. Two
// times per run: the upload (the first file frame to file_saved: 32 KiB
// chunks of base64, sniffed, staged, copied into the workspace) and the
// time to the model request (the input that brings the picture to the
// model receiving the request: the picture read from the workspace,
// scaled where it is larger than the vendors take, encoded into the
// request). A picture that fits goes as it is; a phone photo is scaled
// down to 1568 px first.

// filesResult is one picture's runs.
type filesResult struct {
	name           string
	bytes          int
	width, height  int
	upload, toLLM  []time.Duration
	requestedBytes int // the request body the model received
}

// filePictures are the two pictures measured, each about 1 MiB: a PNG
// within the vendors' limits, and a JPEG larger than them.
func filePictures() ([]filesResult, [][]byte, error) {
	fits := image.NewNRGBA(image.Rect(0, 0, 640, 640))
	seed := uint32(7)
	for y := range 640 {
		for x := range 640 {
			seed = seed*1664525 + 1013904223
			fits.SetNRGBA(x, y, color.NRGBA{uint8(seed >> 24), uint8(seed >> 16), uint8(x + y), 255})
		}
	}
	var p bytes.Buffer
	if err := png.Encode(&p, fits); err != nil {
		return nil, nil, err
	}
	photo := image.NewRGBA(image.Rect(0, 0, 4032, 3024))
	for y := range 3024 {
		for x := range 4032 {
			seed = seed*1664525 + 1013904223
			n := uint8(seed>>28) * 2
			photo.SetRGBA(x, y, color.RGBA{uint8(x/16) + n, uint8(y/12) + n, uint8((x+y)/28) + n, 255})
		}
	}
	var j bytes.Buffer
	if err := jpeg.Encode(&j, photo, &jpeg.Options{Quality: 30}); err != nil {
		return nil, nil, err
	}
	return []filesResult{
			{name: "PNG within the limits", bytes: p.Len(), width: 640, height: 640},
			{name: "JPEG photo, scaled to 1568 px", bytes: j.Len(), width: 4032, height: 3024},
		},
		[][]byte{p.Bytes(), j.Bytes()}, nil
}

// measureFiles runs each picture runs times, each in a new conversation
// of one gateway.
func measureFiles(ctx context.Context, bin, dir string, runs int) ([]filesResult, error) {
	results, pictures, err := filePictures()
	if err != nil {
		return nil, err
	}
	llm := openaitest.New()
	defer llm.Close()
	arrived := make(chan time.Time, 1)
	llm.Respond(func(openaitest.Request) openaitest.Reply {
		arrived <- time.Now()
		return openaitest.Reply{Text: []string{"A picture."}}
	})
	gw, err := startGateway(ctx, bin, dir, strings.TrimSuffix(llm.BaseURL(), "/v1"))
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	for i := range results {
		for run := range runs {
			up, toLLM, err := sendPicture(ctx, "ws://"+gw.addr+"/ws", pictures[i], run, arrived)
			if err != nil {
				return nil, fmt.Errorf("%s, run %d: %w", results[i].name, run, err)
			}
			results[i].upload = append(results[i].upload, up)
			results[i].toLLM = append(results[i].toLLM, toLLM)
		}
		reqs := llm.Requests()
		body, _ := json.Marshal(reqs[len(reqs)-1])
		results[i].requestedBytes = len(body)
	}
	return results, nil
}

// sendPicture sends data as a file in a new conversation, then a message
// with it, and times both.
func sendPicture(ctx context.Context, url string, data []byte, run int, arrived <-chan time.Time) (upload, toLLM time.Duration, err error) {
	c, err := dialSession(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return c.WriteMessage(gws.TextMessage, b)
	}
	until := func(marker string) error {
		for {
			_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, msg, err := c.ReadMessage()
			if err != nil {
				return err
			}
			if bytes.Contains(msg, []byte(`"type":"error"`)) {
				return fmt.Errorf("the gateway answered with an error: %s", msg)
			}
			if bytes.Contains(msg, []byte(marker)) {
				return nil
			}
		}
	}
	name := fmt.Sprintf("picture-%d.bin", run)
	start := time.Now()
	if err := send(map[string]any{"type": "file", "id": "f1", "name": name, "size": len(data)}); err != nil {
		return 0, 0, err
	}
	for off := 0; off < len(data); off += 32 << 10 {
		chunk := data[off:min(off+32<<10, len(data))]
		if err := send(map[string]any{"type": "file_chunk", "id": "f1", "data": base64.StdEncoding.EncodeToString(chunk)}); err != nil {
			return 0, 0, err
		}
	}
	if err := until(`"file_saved"`); err != nil {
		return 0, 0, fmt.Errorf("upload: %w", err)
	}
	upload = time.Since(start)
	start = time.Now()
	if err := send(map[string]any{"type": "input", "id": "m1", "text": "What is this?", "files": []string{"f1"}}); err != nil {
		return 0, 0, err
	}
	select {
	case at := <-arrived:
		toLLM = at.Sub(start)
	case <-time.After(20 * time.Second):
		return 0, 0, fmt.Errorf("the model was not asked within 20 s")
	}
	if err := until(`"role":"assistant"`); err != nil {
		return 0, 0, fmt.Errorf("answer: %w", err)
	}
	return upload, toLLM, nil
}

// median and p90 of a run's times.
func quantiles(ds []time.Duration) (p50, p90 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*9/10)]
}

func (r *report) filesSection(p func(string, ...any)) {
	p("## Files from people\n\n")
	p("A picture a person sends over /ws, through the gateway binary, against a scripted model in this process, %d runs each, a new conversation each: "+
		"the upload (the first `file` frame to `file_saved`: 32 KiB chunks of base64, the type sniffed, staged, copied into the workspace) and the time "+
		"from the `input` that brings it to the model receiving the request (the picture read from the workspace, scaled in pure Go where it is larger "+
		"than the vendors take, encoded into the request).\n\n", len(r.files[0].upload))
	p("| picture | bytes | pixels | upload p50 | upload p90 | input → model request p50 | p90 | request body |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, f := range r.files {
		u50, u90 := quantiles(f.upload)
		m50, m90 := quantiles(f.toLLM)
		p("| %s | %s | %d × %d | %s | %s | %s | %s | %s |\n", f.name, byteLabel(f.bytes), f.width, f.height,
			u50.Round(100*time.Microsecond), u90.Round(100*time.Microsecond), m50.Round(100*time.Microsecond), m90.Round(100*time.Microsecond), byteLabel(f.requestedBytes))
	}
	p("\n")
}
